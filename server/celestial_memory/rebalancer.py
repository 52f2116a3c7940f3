"""Re-placing memories: the periodic/on-demand rebalance and capacity enforcement.

A rebalance scores every memory of a tenant in one vectorised pass with C = 0 (no context:
DESIGN.md §1), moves the memories whose zone changed, pushes each bounded zone's overflow
outward (lowest score first, pinned last) and writes only the memories that moved, in one batch.
Pinned memories never move outward by score.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Collection

import numpy as np
from celestial_memory.clock import Clock
from celestial_memory.domain.models import Memory, MemoryFilter, RebalanceReport
from celestial_memory.domain.scoring import MemoryFunction
from celestial_memory.domain.zones import Zone, ZoneTable
from celestial_memory.store.base import MemoryStore


class Rebalancer:
    def __init__(
        self,
        store: MemoryStore,
        fn: MemoryFunction,
        zones: ZoneTable,
        clock: Clock,
        lock: threading.RLock,
    ) -> None:
        self._store = store
        self._fn = fn
        self._zones = zones
        self._clock = clock
        self._lock = lock

    def current_scores(self, memories: list[Memory], now: float, with_context: bool) -> np.ndarray:
        n = np.fromiter((m.recall_count for m in memories), np.float64, len(memories))
        last = np.fromiter((m.last_recalled_at for m in memories), np.float64, len(memories))
        a = np.fromiter((m.importance for m in memories), np.float64, len(memories))
        c = (
            np.fromiter((m.context_score for m in memories), np.float64, len(memories))
            if with_context
            else np.zeros(len(memories))
        )
        return self._fn.total(n, last, a, c, now)

    def rebalance(self, tenant: str, dry_run: bool = False) -> RebalanceReport:
        started = time.perf_counter()
        with self._lock:
            now = self._clock.now()
            memories = [m for page in self._store.scan(tenant, MemoryFilter()) for m in page]
            scores = self.current_scores(memories, now, with_context=False)
            current = np.fromiter((m.zone for m in memories), np.int64, len(memories))
            pinned = np.fromiter((m.pinned for m in memories), np.int64, len(memories))
            by_score = self._zones.zone_of(scores)
            by_score = np.where(pinned == 1, np.minimum(by_score, current), by_score)
            final = self._zones.enforce_capacity(by_score, scores, keep=pinned)
            changed = np.flatnonzero(final != current)
            evicted = int(np.count_nonzero(final != by_score))
            moved = Counter(
                (Zone(int(current[i])), Zone(int(final[i]))) for i in changed
            )
            if not dry_run and len(changed):
                self._store.set_fields(
                    tenant,
                    [
                        (memories[i].id, {"zone": int(final[i]), "score": float(scores[i])})
                        for i in changed
                    ],
                )
        return RebalanceReport(
            scanned=len(memories),
            moved=dict(moved),
            evicted=evicted,
            forgotten=0,
            dry_run=dry_run,
            duration_ms=(time.perf_counter() - started) * 1000,
        )

    def enforce_capacity(self, tenant: str, keep_ids: Collection[str] = ()) -> dict[str, Zone]:
        """Push overflow outward zone by zone; returns the memories moved and their new zone.

        Called under the service lock after writes that may fill a zone. Only the members of
        over-full bounded zones are read, so the cost is bounded by the capacities.
        """
        counts = self._store.count_by_zone(tenant)
        now = self._clock.now()
        moved: dict[str, Zone] = {}
        for zone in self._zones.bounded_zones():
            cap = self._zones.capacity_of(zone)
            if zone == Zone.CLOUD or counts[zone] <= cap:
                continue
            members = [
                m for page in self._store.scan(tenant, MemoryFilter(zones=[zone])) for m in page
            ]
            scores = self.current_scores(members, now, with_context=True)
            keep = np.array(
                [2 * m.pinned + (m.id in keep_ids) for m in members], dtype=np.int64
            )
            zones = np.full(len(members), int(zone), dtype=np.int64)
            new = self._zones.enforce_capacity(zones, scores, keep=keep)
            out = np.flatnonzero(new != zone)
            self._store.set_fields(tenant, [(members[i].id, {"zone": int(new[i])}) for i in out])
            for i in out:
                moved[members[i].id] = Zone(int(new[i]))
                counts[Zone(int(new[i]))] += 1
        return moved
