"""A recall's four signals on one scale: what the relevance weighs (recall/retrieval.py) and what
the learned ranker reads (ranking/features.py), from one function so the two cannot drift."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def scaled(scores: FloatArray) -> FloatArray:
    """Rows: candidates; columns: dense, context dense, keywords, context keywords. Cosines are
    clipped to [0, 1]; keyword scores are divided by the best among the candidates (BM25 has no
    fixed scale). A copy: ``scores`` is left as it is."""
    s = np.array(scores, dtype=np.float64, copy=True).reshape(-1, 4)
    s[:, :2] = np.clip(s[:, :2], 0.0, 1.0)
    best = s[:, 2:].max(axis=0) if len(s) else np.zeros(2)
    s[:, 2:] = np.divide(s[:, 2:], best, out=np.zeros_like(s[:, 2:]), where=best > 0)
    return s
