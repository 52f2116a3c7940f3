"""A recall's order by the learned ranker: its best candidates by relevance (as many as the model
was trained to re-rank) are read in one round trip, only the payload fields the features use
(store/ranking_facts.py), scored, and put ahead of the rest in the model's order (moved by the
tenant's votes, when they tune it); the rest follow by relevance. The relevance itself is
unchanged: it still decides the gate and the zone order's near ties (recall/retrieval.py), and
it is what a result reports."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from celestial_memory.ranking.features import features
from celestial_memory.ranking.learned import LearnedRanker
from celestial_memory.ranking.tuning import Tuning
from celestial_memory.store.repository import MemoryRepository

FloatArray = npt.NDArray[np.float64]


def learned_key(ranker: LearnedRanker, store: MemoryRepository, tenant: str, query: str,
                asked: Sequence[str], ids: Sequence[str], signals: FloatArray,
                relevance: FloatArray, tuning: Tuning | None = None) -> FloatArray:
    """The key to order the candidates by (higher first). ``tuning``: the tenant's layer learnt
    from its votes (ranking/tuning.py)."""
    best = np.argsort(-relevance, kind="stable")[:ranker.candidates]
    facts = store.ranking_facts.read(tenant, [ids[i] for i in best])
    found = {mid: i for i, mid in enumerate(ids)}
    best = np.array([found[mid] for mid in facts.ids], dtype=np.int64)
    key = np.asarray(relevance, dtype=np.float64).copy()  # in [0, 1]: below every scored one
    if len(best):
        rows = features(query, asked, signals[best], relevance[best], facts)
        scores = ranker.scores(rows)
        if tuning is not None:
            scores = tuning.adjusted(tenant, facts.ids, rows, scores)
        place = np.argsort(np.argsort(-scores, kind="stable"), kind="stable")
        key[best] = 2.0 + (len(best) - place)  # the model's first highest, all above 1
    return key
