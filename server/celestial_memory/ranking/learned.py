"""The learned ranker: a LightGBM LambdaMART model over the features of a recall's best
candidates (features.py), trained by ``make train-ranker`` and shipped in ``model/`` with its
card (``card.json``: the data, the features, the command, the figures, the model's SHA-256);
``CELESTIAL_RANKER_MODEL`` names another folder that command wrote.

It is loaded once, at start-up, and nothing in a folder can end the server: the card is checked
against its schema (card.py) before the model is read; the model's hash must be the card's, its
features this code's, and its text must pass a structural check and a trial parse in a
short-lived process (model_text.py) before LightGBM holds it here. A model that fails any of
these is not used: the hand-weighted order runs instead, and one log line says why (``load``)."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from celestial_memory.ranking.card import CARD_BYTES, CardRefused, parse_card
from celestial_memory.ranking.features import FEATURES
from celestial_memory.ranking.model_text import MODEL_BYTES, TextRefused, check_structure, trial_load

log = logging.getLogger(__name__)
MODEL_DIR = Path(__file__).resolve().parent / "model"
# The shipped model's text, pinned: those exact bytes were parsed when it was trained and are
# tried by the suite (tests/unit/test_ranker_pin.py), so a server need not try them again in a
# process of its own at every start (a second interpreter importing LightGBM: 1-3 s). Any other
# text, the shipped folder's included once changed, is tried.
SHIPPED_SHA256 = "cf51a6f79dce2343240b2ab5ff37f2cd53c8404285b25ba5100be37d06df3b2b"
FloatArray = npt.NDArray[np.float64]


class ModelRefused(Exception):
    """Why a model file cannot be used."""


@dataclass(frozen=True)
class LearnedRanker:
    booster: Any  # lightgbm.Booster
    candidates: int  # how many of the best by relevance it re-ranks
    name: str  # for the start-up line

    def scores(self, rows: FloatArray) -> FloatArray:
        """Higher is better; only their order means anything."""
        if len(rows) == 0:
            return np.zeros(0)
        return np.asarray(self.booster.predict(rows, num_threads=1), dtype=np.float64)


def read(folder: Path) -> LearnedRanker:
    """The model in ``folder`` (``ranker.txt`` and ``card.json``), checked; ModelRefused says
    what is wrong with it."""
    try:
        card = parse_card(_bounded(folder / "card.json", CARD_BYTES))
    except CardRefused as why:
        raise ModelRefused(f"{folder / 'card.json'}: {why}") from None
    data = _bounded(folder / "ranker.txt", MODEL_BYTES)
    digest = hashlib.sha256(data).hexdigest()
    if digest != card.sha256:
        raise ModelRefused(f"{folder / 'ranker.txt'} has SHA-256 {digest[:12]}…, its card says "
                           f"{card.sha256[:12]}…: damaged or replaced")
    if tuple(card.features) != FEATURES:
        raise ModelRefused("the model was trained on other features than this server computes")
    try:
        text = data.decode("utf-8")
        check_structure(text, len(FEATURES))
        if digest != SHIPPED_SHA256:
            trial_load(text, digest, len(FEATURES))
    except UnicodeDecodeError:
        raise ModelRefused(f"{folder / 'ranker.txt'} is not UTF-8 text") from None
    except TextRefused as why:
        raise ModelRefused(f"{folder / 'ranker.txt'}: {why}") from None
    try:
        import lightgbm

        booster = lightgbm.Booster(model_str=text)
    except Exception as exc:  # LightGBM's own errors, or the package missing
        raise ModelRefused(f"LightGBM cannot read {folder / 'ranker.txt'}: {exc}") from None
    if booster.num_feature() != len(FEATURES):
        raise ModelRefused(f"the model reads {booster.num_feature()} features, not {len(FEATURES)}")
    return LearnedRanker(booster, card.candidates, f"{card.name} ({digest[:12]})")


def _bounded(path: Path, limit: int) -> bytes:
    """The bytes of ``path``, refused beyond ``limit`` (read no further than that)."""
    try:
        with path.open("rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise ModelRefused(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise ModelRefused(f"{path} is larger than {limit:,} bytes")
    if not data:
        raise ModelRefused(f"{path} is empty")
    return data


def load(choice: str, folder: Path | None = None, *, feedback: bool = False) -> LearnedRanker | None:
    """The ranker ``CELESTIAL_RANKER`` asks for, from ``folder`` (CELESTIAL_RANKER_MODEL; None:
    the shipped model): None for the hand-weighted order (``weights``, or a learned model that
    cannot be used, said in one warning line). ``feedback`` (CELESTIAL_RANKER_FEEDBACK) is said
    in the same line: votes tune only a learned order."""
    if choice != "learned":
        log.info("ranker: the weighted relevance orders recalls within the zone tiers "
                 "(CELESTIAL_RANKER=%s)%s", choice,
                 "; CELESTIAL_RANKER_FEEDBACK has no effect without the learned ranker"
                 if feedback else "")
        return None
    folder = folder or MODEL_DIR
    try:
        ranker = read(folder)
    except Exception as why:  # ModelRefused, or a check's own fault: never the server's end
        log.warning("ranker: the learned model in %s is not used, the weighted relevance orders "
                    "recalls: %s%s", folder, why if isinstance(why, ModelRefused)
                    else f"unexpected {type(why).__name__}: {why}",
                    "; CELESTIAL_RANKER_FEEDBACK has no effect" if feedback else "")
        return None
    log.info("ranker: the learned model %s from %s orders each recall's %d best candidates "
             "within the zone tiers%s; the weighted relevance still gates them, decides the "
             "zones' near ties and is the relevance a result reports", ranker.name, folder,
             ranker.candidates, ", tuned by each tenant's Feedback votes" if feedback else "")
    return ranker
