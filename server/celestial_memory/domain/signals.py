"""A recall's signals on one scale: what the relevance weighs (recall/retrieval.py) and what the
learned ranker reads (ranking/features.py), from one function each so the two cannot drift."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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


def entity_share(asked: Sequence[str],
                 mentions: Sequence[Iterable[str]]) -> tuple[FloatArray, FloatArray]:
    """Per candidate (``mentions``: the entity ids each mentions): the share of the query's
    entities ``asked`` it mentions, each weighed by its IDF among the candidates (a name every
    candidate mentions counts little), and how many of them it mentions."""
    has = np.array([[e in held for e in asked] for held in map(set, mentions)],
                   dtype=np.float64).reshape(len(mentions), len(asked))
    idf = np.log1p(len(mentions) / (1.0 + has.sum(axis=0)))
    return has @ idf / max(float(idf.sum()), 1e-9), has.sum(axis=1)
