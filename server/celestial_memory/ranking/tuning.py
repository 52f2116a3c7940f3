"""Learning from use (docs/design.md, "A ranking that learns"): with CELESTIAL_RANKER_FEEDBACK,
each tenant's Feedback votes tune its learned ranking through a small layer over the model's
score. The layer is a weight per feature; a candidate's learned score moves by the weights times
its features, standardised among the recall's candidates (so a weight means "more of this than
the other candidates", whatever the feature's scale), and by at most ``ranker_feedback_bound``.

A vote is learnt against the opposite votes on the same recall (pairwise, as RankNet): for each
pair of a helpful and a not-helpful memory the caller was shown together, the weights move
``ranker_feedback_rate`` along the difference of their rows, times how far the layer still is
from ranking the helpful one first, each weight held within the bound. A vote with no opposite
one on its recall teaches nothing: learnt alone, votes against everything a recall showed
taught the layer to demote whatever the model ranks first (docs/benchmarks.md, "Learning from
use"). No number of votes moves a candidate's score more than the bound: a burst of 1,000
not-helpful votes lowers a memory by that much at most, and its relevance (the weights' order)
still gates and places it as before (recall/retrieval.py).

The rows of a tenant's recent recalls are held in memory (the last ``RECENT`` memories per
tenant, for ``TENANTS`` tenants): a vote on a memory no recall here returned lately (after a
restart, or on another replica) still moves its importance, and teaches the layer nothing.
The weights are kept beside the memories (the ledger's tuning record, written with each vote)
and travel with the tenant's Export and Import.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from celestial_memory.config import Settings
from celestial_memory.ranking.features import FEATURES
from celestial_memory.store.repository import MemoryRepository

FloatArray = npt.NDArray[np.float64]
# Bounds on what the votes to come are kept for: about 30 MB of rows at most.
RECENT = 1024  # rows remembered per tenant (a recall's best 30 each)
TENANTS = 64  # tenants whose rows are remembered, the most recent
VOTES_PER_RECALL = 16  # the last helpful and the last not-helpful votes kept per recall
RECALLS_VOTED = 1024  # recalls whose votes are kept


@dataclass(frozen=True, slots=True)
class Tuned:
    """A tenant's layer: a weight per feature (by name) and how many votes taught it."""

    features: tuple[str, ...]
    weights: tuple[float, ...]
    votes: int


@dataclass(frozen=True, slots=True)
class Seen:
    """A memory as one recall ranked it: its standardized row, the model's score, which recall."""

    row: FloatArray
    score: float
    recall: int


def standardized(rows: FloatArray) -> FloatArray:
    """Each column less its mean over the candidates, over its spread (0 where all are equal)."""
    if len(rows) == 0:
        return rows
    spread = rows.std(axis=0)
    return np.where(spread > 1e-12, (rows - rows.mean(axis=0)) / np.maximum(spread, 1e-12), 0.0)


class Tuning:
    def __init__(self, settings: Settings, store: MemoryRepository) -> None:
        self.learning = settings.ranker_feedback
        self._rate = settings.ranker_feedback_rate
        self._bound = settings.ranker_feedback_bound
        self._store = store
        self._lock = threading.Lock()
        self._weights: dict[str, FloatArray] = {}
        self._votes: dict[str, int] = {}
        self._rows: OrderedDict[str, OrderedDict[str, Seen]] = OrderedDict()
        # The votes on each recent recall's memories: a vote is learnt against the opposite
        # votes on the same recall.
        self._voted: OrderedDict[int, tuple[list[Seen], list[Seen]]] = OrderedDict()
        self._recalls = 0

    def shift(self, tenant: str, z: FloatArray) -> FloatArray:
        """How far the layer moves each candidate's learned score (``z``: standardized rows)."""
        w = self._of(tenant)
        return np.clip(z @ w, -self._bound, self._bound)

    def adjusted(self, tenant: str, ids: Sequence[str], rows: FloatArray,
                 scores: FloatArray) -> FloatArray:
        """The scores with the tenant's layer, and the rows kept for the votes to come."""
        if not self.learning or len(rows) == 0:
            return scores
        z = standardized(rows)
        with self._lock:
            self._recalls += 1
            held = self._rows.pop(tenant, None) or OrderedDict()
            self._rows[tenant] = held  # most recent tenant last
            for mid, row, s in zip(ids, z, scores, strict=True):
                held.pop(mid, None)
                held[mid] = Seen(row, float(s), self._recalls)
            while len(held) > RECENT:
                held.popitem(last=False)
            while len(self._rows) > TENANTS:
                self._rows.popitem(last=False)
        return scores + self.shift(tenant, z)

    def vote(self, tenant: str, memory_id: str, helpful: bool) -> bool:
        """Learn from one vote; False when no recent recall here returned the memory."""
        if not self.learning:
            return False
        with self._lock:
            held = self._rows.get(tenant)
            seen = held.get(memory_id) if held is not None else None
            if seen is None:
                return False
            not_helpful, helpful_ones = self._voted.setdefault(seen.recall, ([], []))
            w = self._of(tenant).copy()
            for other in not_helpful if helpful else helpful_ones:
                good, bad = (seen, other) if helpful else (other, seen)
                d = good.row - bad.row
                margin = good.score - bad.score + float(np.clip(d @ w, -2 * self._bound,
                                                                2 * self._bound))
                w = np.clip(w + self._rate * d / (1.0 + np.exp(margin)), -self._bound,
                            self._bound)
            mine = helpful_ones if helpful else not_helpful
            mine.append(seen)
            del mine[:-VOTES_PER_RECALL]
            while len(self._voted) > RECALLS_VOTED:
                self._voted.popitem(last=False)
            self._weights[tenant] = w
            self._votes[tenant] = self._votes.get(tenant, 0) + 1
            votes = self._votes[tenant]
        self._store.write_tuning(tenant, FEATURES, w.tolist(), votes)
        return True

    def exported(self, tenant: str) -> Tuned | None:
        """The tenant's layer, None when no vote ever taught it."""
        w = self._of(tenant)
        if not self._votes.get(tenant):
            return None
        return Tuned(FEATURES, tuple(float(x) for x in w), self._votes[tenant])

    def restore(self, tenant: str, tuned: Tuned) -> None:
        """An imported layer: weights matched by feature name (others dropped), within bound."""
        w = self._by_name(tuned.features, tuned.weights)
        with self._lock:
            self._weights[tenant] = w
            self._votes[tenant] = max(int(tuned.votes), 0)
        self._store.write_tuning(tenant, FEATURES, w.tolist(), max(int(tuned.votes), 0))

    def _of(self, tenant: str) -> FloatArray:
        """The tenant's weights: read once from the store, zeros before any vote."""
        if (w := self._weights.get(tenant)) is not None:
            return w
        kept = self._store.read_tuning(tenant)
        w, votes = np.zeros(len(FEATURES)), 0
        if kept is not None:
            names, values, votes = kept
            w = self._by_name(names, values)
        self._weights.setdefault(tenant, w)
        self._votes.setdefault(tenant, votes)
        return self._weights[tenant]

    def _by_name(self, names: Sequence[str], values: Sequence[float]) -> FloatArray:
        """Weights matched to FEATURES by name (others dropped), finite and within the bound."""
        index = {name: i for i, name in enumerate(FEATURES)}
        w = np.zeros(len(FEATURES))
        for name, x in zip(names, values, strict=False):
            if name in index and np.isfinite(x):
                w[index[name]] = x
        return np.clip(w, -self._bound, self._bound)
