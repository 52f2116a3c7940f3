"""The learned ranker: a LightGBM LambdaMART model over the features of a recall's best
candidates (features.py), trained by ``make train-ranker`` and shipped in ``model/`` with its
card (``card.json``: the data, the features, the command, the figures, the model's SHA-256).

It is loaded once, at start-up. A model that is missing, whose hash is not the card's, whose
features are not this code's, or that LightGBM cannot read is not used: the hand-weighted order
runs instead, and one log line says why (``load``)."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from celestial_memory.ranking.features import FEATURES

log = logging.getLogger(__name__)
MODEL_DIR = Path(__file__).resolve().parent / "model"
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
        card = json.loads((folder / "card.json").read_text())
        data = (folder / "ranker.txt").read_bytes()
    except (OSError, ValueError) as exc:
        raise ModelRefused(f"cannot read the model or its card in {folder}: {exc}") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != card.get("sha256"):
        raise ModelRefused(f"{folder / 'ranker.txt'} has SHA-256 {digest[:12]}…, its card says "
                           f"{str(card.get('sha256'))[:12]}…: damaged or replaced")
    if tuple(card.get("features", ())) != FEATURES:
        raise ModelRefused("the model was trained on other features than this server computes")
    try:
        import lightgbm

        booster = lightgbm.Booster(model_str=data.decode())
    except Exception as exc:  # LightGBM's own errors, or the package missing
        raise ModelRefused(f"LightGBM cannot read {folder / 'ranker.txt'}: {exc}") from None
    if booster.num_feature() != len(FEATURES):
        raise ModelRefused(f"the model reads {booster.num_feature()} features, not {len(FEATURES)}")
    return LearnedRanker(booster, int(card.get("candidates", 50)),
                         f"{card.get('name', 'ranker')} ({digest[:12]})")


def load(choice: str, folder: Path | None = None, *, feedback: bool = False) -> LearnedRanker | None:
    """The ranker ``CELESTIAL_RANKER`` asks for: None for the hand-weighted order (``weights``,
    or a learned model that cannot be used, said in one log line). ``feedback``
    (CELESTIAL_RANKER_FEEDBACK) is said in the same line: votes tune only a learned order."""
    if choice != "learned":
        log.info("ranker: the weighted relevance orders recalls (CELESTIAL_RANKER=%s)%s", choice,
                 "; CELESTIAL_RANKER_FEEDBACK has no effect without the learned ranker"
                 if feedback else "")
        return None
    try:
        ranker = read(folder or MODEL_DIR)
    except ModelRefused as why:
        log.warning("ranker: the learned model is not used, the weighted relevance orders "
                    "recalls: %s%s", why, "; CELESTIAL_RANKER_FEEDBACK has no effect"
                    if feedback else "")
        return None
    log.info("ranker: the learned model %s orders each recall's %d best candidates%s",
             ranker.name, ranker.candidates,
             ", tuned by each tenant's Feedback votes" if feedback else "")
    return ranker
