"""The first half of a recall: its candidates and their relevance, before zone order.

The zones' candidates (one batched search and one batched rescoring, store/repository.py), the
archive's (in the same two batches) when asked or when a deep recall finds too few good matches,
the graph's neighbours of the best (graph/expansion.py) when expansion is on, the entity
signal over all of them (recall/retrieval.py), and last, when the learned ranker runs, its order
of the best of them (ranking/order.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from celestial_memory.config import Settings
from celestial_memory.domain import validation as check
from celestial_memory.domain.models import MemoryFilter, Via
from celestial_memory.domain.requests import RecallQuery
from celestial_memory.domain.zones import Zone
from celestial_memory.graph.expansion import expand
from celestial_memory.observability import metrics
from celestial_memory.ranking.learned import LearnedRanker
from celestial_memory.ranking.order import learned_key
from celestial_memory.ranking.tuning import Tuning
from celestial_memory.recall.retrieval import Retrieval
from celestial_memory.store.payload import ARCHIVE_ZONE
from celestial_memory.store.repository import Candidates, MemoryRepository


@dataclass(slots=True)
class Found:
    candidates: Candidates
    relevance: npt.NDArray[np.float64]
    via: dict[str, Via]  # the candidates the graph lifted, and how
    asked: list[str]  # the entity ids the query mentions
    # The learned ranker's order (higher first; None: by relevance).
    key: npt.NDArray[np.float64] | None = None


class RecallCandidates:
    def __init__(self, settings: Settings, store: MemoryRepository, retrieval: Retrieval,
                 ranker: LearnedRanker | None = None, tuning: Tuning | None = None) -> None:
        self._s, self._store, self._retrieval = settings, store, retrieval
        self.ranker = ranker  # None: the weighted relevance orders (CELESTIAL_RANKER)
        self.tuning = tuning  # the tenants' votes' layer over the ranker (ranking/tuning.py)

    def find(self, tenant: str, q: RecallQuery, text: str, qvec: npt.NDArray[np.float32],
             flt: MemoryFilter, gate: float, limit: int, stages: metrics.Stages) -> Found:
        s, store, retrieval = self._s, self._store, self._retrieval
        zones = sorted(set(flt.zones)) if flt.zones else list(Zone)
        with stages("keywords"):
            hq = retrieval.query(text, qvec)
        with stages("entities"):
            asked = retrieval.entities(text)
        per_zone = retrieval.candidates_per_zone(limit)
        deep = s.deep_recall if q.deep is None else q.deep
        # The archive: always when asked, or (a deep recall) only when the zones give fewer
        # than the limit of good matches (the deep gate, at least the gate). A filter naming
        # zones keeps to them. It is searched and rescored in the zones' batches either way
        # (a round trip of its own cost more than its few candidates); the decision is made
        # on the zones' candidates alone, as if it had come after them.
        archive = not flt.zones and (q.include_archived or deep)
        with stages("candidates"):
            cands = store.candidates(tenant, hq, zones, flt, per_zone, asked, archive)
        live = next((i for i, z in enumerate(cands.zones) if z == ARCHIVE_ZONE), len(cands.ids))
        keywords = not hq.keywords.is_empty()
        with stages("rescoring"):
            relevance = retrieval.relevance(cands.signals[:live], keywords=keywords)
            strong = int((relevance >= max(gate, s.deep_recall_gate)).sum())
            if live < len(cands.ids) and (q.include_archived or strong < limit):
                # Ranked together: keyword scores are normalised over both sets of candidates.
                relevance = retrieval.relevance(cands.signals, keywords=keywords)
            else:
                cands = cands.head(live)
        hops = s.recall_expand if q.expand is None else check.hops(q.expand)
        via: dict[str, Via] = {}
        if hops and cands.ids:
            with stages("expansion"):
                grown = expand(store, tenant, hq, flt, cands, relevance, limit, hops,
                               s.graph_weight, asked,
                               lambda rows: retrieval.relevance(rows, keywords=keywords))
            cands, relevance, via = grown.candidates, grown.relevance, grown.via
        with stages("entities"):
            relevance = retrieval.with_entities(relevance, asked, cands.mentions)
        found = Found(cands, relevance, via, asked)
        if self.ranker is not None and text and cands.ids:  # a vector alone has no text to rank
            with stages("ranking"):
                found.key = learned_key(self.ranker, store, tenant, text, asked, cands.ids,
                                        cands.signals, relevance, self.tuning)
        return found
