"""Re-placing memories as time passes: score moves, capacity, forgetting, the ledger.

Scores between recalls only fall, so every write stores when the memory's resting score (C = 0)
will drop below each zone threshold (``domain/trajectory.py``). A rebalance:

1. **moves by score**: the *incremental* rebalance (the default, and the schedule) issues one
   filtered update per zone, ``drop_k < now and zone <= k -> zone k+1``, on indexed fields: it
   touches only the memories whose time has come. The *full* rebalance scans every memory and
   rescores it with numpy; both reach the same zones. A rebalance never moves a memory inward
   (only recall and update do) and never moves a pinned one.
2. **enforces capacity** with cascade: a bounded zone over capacity sends its lowest-scoring
   memories one zone outward (pinned and just-recalled ones last).
3. **forgets** unpinned, not immutable Cloud memories not recalled for ``auto_forget_days``:
   they move into the archive (out of recall, capacity and Stats, kept with their vectors, restorable; a deep
   recall still finds them), and archived memories older than ``archive_retention_days`` (when
   set) are deleted for good.

Every eviction, forgotten (archived) and purged memory leaves a ``ZoneEvent`` in the append-only
ledger. Event
ids are derived from the memory, its last write and the move, so writing the same event twice
(two replicas, a retry) keeps one. Replicas over one store take a lease in the store before a
rebalance; one without the lease skips (``skipped_by`` names the holder).

The rebalancer is logic only: it names the memories it works on as Selections
(domain/selection.py) and the placement (zones/placement.py) runs it under the tenant's lock.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Collection

import numpy as np
from celestial_memory.clock import Clock
from celestial_memory.config import Settings
from celestial_memory.domain.models import Memory, RebalanceReport, ZoneEvent
from celestial_memory.domain.scoring import MemoryFunction
from celestial_memory.domain.selection import Falling, Selection
from celestial_memory.domain.trajectory import ALREADY, drop_times
from celestial_memory.domain.zones import Zone, ZoneTable
from celestial_memory.store.repository import MemoryRepository

DAY = 86_400.0


def event_id(memory_id: str, version: str, from_zone: int, to: str) -> str:
    """Between two writes of a memory its zone only moves outward, so (memory, the state of its
    last write, from, to) names one event: the same eviction seen twice gets the same id."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"celestial-event:{memory_id}:{version}:{from_zone}:{to}"))


class Rebalancer:
    def __init__(
        self,
        repo: MemoryRepository,
        fn: MemoryFunction,
        zones: ZoneTable,
        clock: Clock,
        settings: Settings,
    ) -> None:
        self._repo = repo
        self._fn = fn
        self._zones = zones
        self._clock = clock
        self._forget_after = settings.auto_forget_days * DAY
        self._retention = settings.archive_retention_days * DAY  # 0: keep forever
        self._lease_ttl = settings.rebalance_lease_s
        # Writes racing a rebalance and clock skew between replicas: look this far back.
        self._window_slack = max(600.0, 2 * settings.rebalance_lease_s)
        self.instance_id = settings.instance_id

    def drop_times(self, recall_count: int, last_recalled_at: float, importance: float) -> tuple[
        float, float, float, float
    ]:
        t = drop_times(self._fn, self._zones, recall_count, last_recalled_at, importance)
        return (float(t[0]), float(t[1]), float(t[2]), float(t[3]))

    def stamped(self, m: Memory, now: float) -> Memory:
        """``m``, about to be written, stamped with its drop times and write time."""
        m.drop_times = self.drop_times(m.recall_count, m.last_recalled_at, m.importance)
        m.written_at = now
        return m

    def settled_zone(self, m: Memory, now: float) -> Zone:
        """The zone to write for ``m`` (drop times stamped): its zone, unless its drop time for
        that zone has already passed, then its resting zone. The incremental rebalance relies on
        no write leaving a memory in a zone whose drop time has passed."""
        drops = m.drop_times
        if m.pinned or m.zone == Zone.CLOUD or drops is None or not ALREADY < drops[m.zone] < now:
            return m.zone
        resting = self._fn.total(m.recall_count, m.last_recalled_at, m.importance, 0.0, now)
        return max(m.zone, self._zones.zone_of_score(float(resting)))

    # -- the rebalance ------------------------------------------------------------------------

    def rebalance(
        self, tenant: str, dry_run: bool = False, full: bool = False, forget: bool = True
    ) -> RebalanceReport:
        started = time.perf_counter()
        lease = f"rebalance:{tenant}"
        holder = self._repo.acquire_lease(lease, self.instance_id, self._clock.now(),
                                          self._lease_ttl)
        if holder != self.instance_id:
            return RebalanceReport(0, {}, 0, 0, dry_run, 0.0, full, skipped_by=holder)
        try:
            now = self._clock.now()
            scanned, moved = (self._full(tenant, now, dry_run) if full
                              else self._incremental(tenant, now, dry_run))
            if not dry_run:
                self._repo.write_marker(f"rebalanced:{tenant}", now)
            purged = 0
            if dry_run:
                evicted = self._overflow_after(tenant, moved)
                if forget:
                    forgotten = self._repo.count(tenant, self._forgettable(now))
                    purged = self._repo.count(tenant, self._purgeable(now)) if self._retention else 0
                else:
                    forgotten = 0
            else:
                evicted = len(self.enforce_capacity(tenant))
                forgotten = self.forget(tenant, now) if forget else 0
                purged = self.purge(tenant, now) if forget else 0
        finally:
            self._repo.release_lease(lease, self.instance_id)
        return RebalanceReport(
            scanned=scanned, moved=moved, evicted=evicted, forgotten=forgotten, dry_run=dry_run,
            duration_ms=(time.perf_counter() - started) * 1000, full=full, purged=purged,
        )

    def _incremental(
        self, tenant: str, now: float, dry_run: bool
    ) -> tuple[int, dict[tuple[Zone, Zone], int]]:
        """Move the memories whose drop time for their zone has passed, each written once.

        Every write keeps an unpinned memory's drop time for its zone in the future or at the
        ALREADY sentinel (a recall's context lifted it there). So the memories due now are those
        whose drop time passed since the last rebalance, or is ALREADY: narrow ranges of an
        indexed field. For each (from, to) pair the engine selects its memories by filter,
        counts them and sets their zone: nothing is read into Python.
        """
        last = self._repo.read_marker(f"rebalanced:{tenant}")
        since = None if last is None else last - self._window_slack
        moved: dict[tuple[Zone, Zone], int] = {}
        for src in (Zone.CORE, Zone.INNER, Zone.OUTER, Zone.BELT):
            for dst in Zone:
                if dst <= src:
                    continue
                sel = Selection(zones=(src,), unpinned=True, falling=Falling(src, dst, now, since))
                n = self._repo.count(tenant, sel)
                if n:
                    moved[(src, dst)] = n
                    if not dry_run:
                        self._repo.set_zone(tenant, dst, where=sel)
        return sum(moved.values()), moved

    def _full(
        self, tenant: str, now: float, dry_run: bool
    ) -> tuple[int, dict[tuple[Zone, Zone], int]]:
        # Only memories that can move are read: a rebalance moves nothing inward, nothing out of
        # the cloud (the last zone) and nothing pinned.
        movable = Selection(zones=(Zone.CORE, Zone.INNER, Zone.OUTER, Zone.BELT), unpinned=True)
        m = self._repo.members(tenant, movable)
        scores = self._fn.total(m.recall_count, m.last, m.importance, 0.0, now)
        target = np.maximum(m.zone, self._zones.zone_of(scores))
        changed = np.flatnonzero(target != m.zone)
        moved = Counter((Zone(int(m.zone[i])), Zone(int(target[i]))) for i in changed)
        if not dry_run:
            for z in np.unique(target[changed]):
                ids = [m.ids[i] for i in changed[target[changed] == z]]
                self._repo.set_zone(tenant, Zone(int(z)), ids=ids)
        return len(m), dict(moved)

    # -- capacity ----------------------------------------------------------------------------

    def enforce_capacity(self, tenant: str, keep_ids: Collection[str] = (),
                         entered: Collection[Zone] | None = None) -> list[ZoneEvent]:
        """Push overflow outward zone by zone; returns the eviction events (also in the ledger).

        Only the members of over-full bounded zones are read, so the cost is bounded by the
        capacities and the overflow, not by the number of memories. ``entered``: the zones that
        memories just entered, when the caller knows them (a write); a zone nothing entered can
        only be over-full if an eviction moves memories into it, so only those are counted.
        """
        now = self._clock.now()
        events: list[ZoneEvent] = []
        check = None if entered is None else set(entered)
        for zone in self._zones.bounded_zones():
            if check is not None and zone not in check:
                continue
            cap = self._zones.capacity_of(zone)
            # Count only the bounded zones: they are small, and counting a large belt or cloud
            # costs time in proportion to it.
            if zone == Zone.CLOUD or self._repo.count(tenant, Selection(zones=(zone,))) <= cap:
                continue
            m = self._repo.members(tenant, Selection(zones=(zone,)))
            # Rank by the score as it stands now, with C from the last recall.
            scores = self._fn.total(m.recall_count, m.last, m.importance, m.context, now)
            keep = 2 * m.pinned + np.fromiter((i in keep_ids for i in m.ids), np.int64, len(m.ids))
            new = self._zones.enforce_capacity(m.zone, scores, keep=keep)
            out = np.flatnonzero(new != int(zone))
            # An evicted memory goes one zone out, or to its resting zone if that is further:
            # a zone must never hold an unpinned memory whose drop time for it has passed.
            resting = self._zones.zone_of(self._fn.total(m.recall_count[out], m.last[out],
                                                         m.importance[out], 0.0, now))
            dest = np.where(m.pinned[out] == 1, int(zone) + 1,
                            np.maximum(int(zone) + 1, resting))
            moves = [
                ZoneEvent(event_id(m.ids[i], m.version(int(i)), int(zone), str(int(d))),
                          tenant, m.ids[i], zone, Zone(int(d)), "capacity", now, m.content_hash[i])
                for i, d in zip(out, dest, strict=True)
            ]
            # The ledger first: a crash between the two can leave an event whose move is not
            # written yet (the next enforcement makes it, under the same event id), never a
            # move without its event.
            self._repo.append_events(moves)
            for z in np.unique(dest):
                self._repo.set_zone(tenant, Zone(int(z)), ids=[m.ids[i] for i in out[dest == z]])
                if check is not None:
                    check.add(Zone(int(z)))
            events += moves
        return events

    def _overflow_after(self, tenant: str, moved: dict[tuple[Zone, Zone], int]) -> int:
        """How many evictions the moves would cause (for a dry run), cascade included."""
        bounded = [z for z in self._zones.bounded_zones() if z != Zone.CLOUD]
        counts: dict[Zone, int] = {
            z: self._repo.count(tenant, Selection(zones=(z,))) for z in bounded
        }
        for (src, dst), n in moved.items():
            counts[src] = counts.get(src, 0) - n
            counts[dst] = counts.get(dst, 0) + n
        evicted = 0
        for zone in bounded:
            over = max(0, counts[zone] - self._zones.capacity_of(zone))
            evicted += over
            nxt = Zone(int(zone) + 1)
            counts[nxt] = counts.get(nxt, 0) + over
        return evicted

    # -- forgetting --------------------------------------------------------------------------

    def _forgettable(self, now: float) -> Selection:
        # In the cloud, or falling there in this rebalance (so a dry run counts what a real
        # run, which moves first and forgets after, will forget).
        return Selection(unpinned=True, reaching_cloud_by=now,
                         not_recalled_since=now - self._forget_after, unprotected=True)

    def forget(self, tenant: str, now: float) -> int:
        """Move forgettable memories into the archive, ledger first: an event is written before
        its memory leaves the zones."""
        m = self._repo.members(tenant, self._forgettable(now))
        if not m.ids:
            return 0
        self._repo.append_events([
            ZoneEvent(event_id(pid, m.version(i), int(Zone.CLOUD), "forgotten"), tenant, pid,
                      Zone.CLOUD, None, "forgotten", now, m.content_hash[i])
            for i, pid in enumerate(m.ids)
        ])
        self._repo.archive(m.ids, now)
        return len(m.ids)

    def _purgeable(self, now: float) -> Selection:
        return Selection(archived=True, archived_before=now - self._retention, unprotected=True)

    def purge(self, tenant: str, now: float) -> int:
        """Delete for good what was archived longer than the retention, ledger first."""
        if not self._retention:
            return 0
        m = self._repo.members(tenant, self._purgeable(now))
        if not m.ids:
            return 0
        self._repo.append_events([
            ZoneEvent(event_id(pid, m.version(i), int(Zone.CLOUD), "purged"), tenant, pid,
                      Zone.CLOUD, None, "purged", now, m.content_hash[i])
            for i, pid in enumerate(m.ids)
        ])
        return self._repo.delete(tenant, m.ids)
