"""The shipped ranker's pin: a server skips the trial parse only for these exact bytes, so the
pin must be the shipped file's, and those bytes must pass the trial a server would make."""

from __future__ import annotations

import hashlib

import pytest
from celestial_memory.ranking import learned
from celestial_memory.ranking.features import FEATURES
from celestial_memory.ranking.model_text import _TRIED, trial_load


def test_the_pin_is_the_shipped_models_and_it_passes_the_trial() -> None:
    data = (learned.MODEL_DIR / "ranker.txt").read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    # A model trained anew (make train-ranker) changes the file: pin its digest here after the
    # trial below passes on it.
    assert digest == learned.SHIPPED_SHA256
    _TRIED.discard(digest)  # tried for real, not remembered from another test
    trial_load(data.decode(), digest, len(FEATURES))


def test_only_the_pinned_bytes_skip_the_trial(monkeypatch: pytest.MonkeyPatch) -> None:
    tried: list[str] = []
    monkeypatch.setattr(learned, "trial_load", lambda text, digest, n: tried.append(digest))
    learned.read(learned.MODEL_DIR)
    assert tried == []
    monkeypatch.setattr(learned, "SHIPPED_SHA256", "0" * 64)  # as if the file had changed
    learned.read(learned.MODEL_DIR)
    assert tried == [hashlib.sha256((learned.MODEL_DIR / "ranker.txt").read_bytes()).hexdigest()]
