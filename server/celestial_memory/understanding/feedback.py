"""Feedback: a caller says whether a memory a recall returned helped, and its importance moves
(docs/design.md, "Types, protection and feedback").

A vote moves importance A a fixed share (``feedback_step``, 0.2 by default) of the way to 1 when
the memory helped, and to 0 when it did not: A stays in [0, 1] and never reaches either end, a
vote counts for less the further the memory already went its way, and one vote each way nearly
cancels. The memory is re-placed by its new score, as an Update of its importance re-places it,
and the vote is an event in the ledger (kind helpful or not_helpful, from and to its zone). A
vote changes no content, so an immutable memory takes feedback too. An archived one is refused
(restore it first), as an Update is, except a turn the turn policy kept out of the zones (a SKIP,
or a RETRIEVE that did not keep its turn): a vote on it judges that decision (memory/observing.py
rewards it; a vote not helpful is the one reward a correct SKIP can get), its importance moves
and is in the ledger, and it stays in the archive, so a later Restore places it by that
importance. With CELESTIAL_RANKER_FEEDBACK a vote on a live memory also tunes the tenant's
learned ranking (ranking/tuning.py).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from celestial_memory.clock import Clock
from celestial_memory.config import Settings
from celestial_memory.domain import validation as check
from celestial_memory.domain.models import EDITED, Memory, ZoneEvent
from celestial_memory.domain.scoring import MemoryFunction
from celestial_memory.domain.zones import ZoneTable
from celestial_memory.errors import FailedPrecondition
from celestial_memory.policy.decision import kept_out
from celestial_memory.ranking.tuning import Tuning
from celestial_memory.store.repository import MemoryRepository
from celestial_memory.zones.placement import Placement

HELPFUL = "helpful"
NOT_HELPFUL = "not_helpful"


def moved(importance: float, helpful: bool, step: float) -> float:
    """Importance after one vote: ``step`` of the way to 1 (helpful) or to 0."""
    return importance + step * (1.0 - importance) if helpful else importance * (1.0 - step)


@dataclass(frozen=True, slots=True)
class Voted:
    """What a vote did: the memory as now stored, and its importance before."""

    memory: Memory
    importance_before: float


class Feedback:
    def __init__(self, settings: Settings, store: MemoryRepository, fn: MemoryFunction,
                 zones: ZoneTable, clock: Clock, placement: Placement,
                 tuning: Tuning | None = None) -> None:
        self._step = settings.feedback_step
        self._store = store
        self._fn = fn
        self._zones = zones
        self._clock = clock
        self._placement = placement
        self._tuning = tuning  # the tenant's learned-ranking layer learns from the vote too

    def give(self, tenant: str, memory_id: str, helpful: bool) -> Voted:
        mid = check.memory_id(memory_id)
        self._placement.flush(tenant)  # the score is computed from its latest recall
        with self._placement.locked(tenant):
            m = self._store.get_one(tenant, mid)
            if m.archived and not kept_out(m):
                raise FailedPrecondition(f"memory {mid} is archived: restore it first")
            now = self._clock.now()
            if m.archived:
                return self._judged_skip(tenant, m, helpful, now)
            before, zone_before = m.importance, m.zone
            m.importance = moved(before, helpful, self._step)
            m.score = float(self._fn.total(m.recall_count, m.last_recalled_at, m.importance,
                                           m.context_score, now))
            target = self._zones.zone_of_score(m.score)
            m.zone = min(m.zone, target) if m.pinned else target
            rebalancer = self._placement.rebalancer
            m.zone = rebalancer.settled_zone(rebalancer.stamped(m, now), now)
            reason = HELPFUL if helpful else NOT_HELPFUL
            # Each vote is its own event (two votes at one instant are two votes): a random id.
            self._store.append_events([ZoneEvent(str(uuid.uuid4()), tenant, mid, zone_before,
                                                 m.zone, reason, now, m.content_hash)])
            self._store.save(tenant, [m], EDITED)
            self._placement.enforce(tenant, [m], keep_ids={m.id})
        if self._tuning is not None:
            self._tuning.vote(tenant, mid, helpful)
        return Voted(m, before)

    def _judged_skip(self, tenant: str, m: Memory, helpful: bool, now: float) -> Voted:
        """A vote on a turn the policy kept out of the zones (the placement lock held): its
        importance moves and the vote is in the ledger, out of the zones as it was."""
        before = m.importance
        m.importance = moved(before, helpful, self._step)
        reason = HELPFUL if helpful else NOT_HELPFUL
        self._store.append_events([ZoneEvent(str(uuid.uuid4()), tenant, m.id, m.zone, None,
                                             reason, now, m.content_hash)])
        self._store.save(tenant, [m], ("importance",), archived_too=True)
        return Voted(m, before)
