"""The archive and erasure: restoring a forgotten memory, and Delete and DeleteByFilter, which
erase live and archived memories alike (docs/design.md, "Forgetting"). Forgetting itself, the
move into the archive and the retention's purge, is the rebalancer's.
"""

from __future__ import annotations

from celestial_memory.clock import Clock
from celestial_memory.config import Settings
from celestial_memory.domain import validation as check
from celestial_memory.domain.models import RESTORED, Memory, MemoryFilter, ZoneEvent
from celestial_memory.domain.scoring import MemoryFunction
from celestial_memory.domain.zones import Zone, ZoneTable
from celestial_memory.errors import InvalidArgument, PermissionDenied
from celestial_memory.graph.relations import DERIVED_FROM, EXTRACTED_FROM
from celestial_memory.store.repository import MemoryRepository
from celestial_memory.zones.placement import Placement
from celestial_memory.zones.rebalancer import event_id


class Archive:
    def __init__(
        self, settings: Settings, store: MemoryRepository, fn: MemoryFunction, zones: ZoneTable,
        clock: Clock, placement: Placement,
    ) -> None:
        self._settings = settings
        self._store = store
        self._fn = fn
        self._zones = zones
        self._clock = clock
        self._placement = placement
        self._rebalancer = placement.rebalancer

    def delete(self, tenant: str, memory_id: str, admin: bool = True) -> bool:
        """Erase a memory, live or archived: the point with its vectors goes, and the ledger
        keeps a tombstone without its content hash (the hash is blanked on its earlier events
        too). An immutable memory, or a repeat kept in one, is erased only by an ``admin``
        caller (PERMISSION_DENIED otherwise): protection holds against a write key, the right
        to erasure stays with the admin."""
        mid = check.memory_id(memory_id)
        self._placement.flush(tenant)
        with self._placement.locked(tenant):
            found = self._store.matching(tenant, ids=[mid])
            if found and not admin and any(m.immutable
                                           for m in self._store.get(tenant, [mid]).values()):
                raise PermissionDenied(f"memory {mid} is immutable: only an admin key deletes it")
            if self._erase(tenant, found):
                return True
            return self._erase_repeat(tenant, mid, admin)

    def _erase_repeat(self, tenant: str, mid: str, admin: bool) -> bool:
        """An id that lives on only as a repeat merged into another memory (a consolidated
        memory, or a Store's request_id): its wording and provenance leave that memory."""
        holder = self._store.merged_holders(tenant, [mid], live_only=False).get(mid)
        if holder is None:
            return False
        if holder.immutable and not admin:
            raise PermissionDenied(f"{mid} is kept in immutable memory {holder.id}: only an "
                                   "admin key deletes it")
        holder.merged = [p for p in holder.merged if p.id != mid]
        now = self._clock.now()
        self._store.append_events([ZoneEvent(
            event_id(mid, repr(now), int(holder.zone), "deleted"), tenant, mid, holder.zone,
            None, "deleted", now, "")])
        self._store.save(tenant, [holder], ("merged",), archived_too=True)
        self._store.erase_from_ledger(tenant, [mid])
        return True

    def delete_by_filter(self, tenant: str, flt: MemoryFilter) -> int:
        """Erase every memory ``flt`` matches, live or archived, as ``delete`` does."""
        check.memory_filter(flt, self._settings)
        if flt.is_empty():
            raise InvalidArgument("filter", "is empty: refusing to delete the whole tenant")
        self._placement.flush(tenant)
        with self._placement.locked(tenant):
            return self._erase(tenant, self._store.matching(tenant, flt))

    def _erase(self, tenant: str, zones: dict[str, Zone]) -> int:
        """Tombstones first (a crash between leaves a tombstone for a memory a retry deletes;
        event ids are derived, so the retry writes none twice), then the points."""
        if not zones:
            return 0
        # What Reflect or the extractor derived from an erased memory goes with it (insights,
        # entity summaries and facts may say what the memory said): no paraphrase stays behind.
        derived = {e.other for es in self._store.graph.edges_of(tenant, list(zones)).values()
                   for e in es if e.relation in (DERIVED_FROM, EXTRACTED_FROM)
                   and not e.outgoing} - set(zones)
        if derived:
            zones = {**zones, **self._store.matching(tenant, ids=sorted(derived))}
        now = self._clock.now()
        ids = list(zones)
        self._store.append_events([
            ZoneEvent(event_id(mid, repr(now), int(z), "deleted"), tenant, mid, z, None,
                      "deleted", now, "")
            for mid, z in zones.items()
        ])
        self._store.erase_from_ledger(tenant, ids)
        return self._store.delete(tenant, ids)

    def restore(self, tenant: str, memory_id: str) -> tuple[Memory, bool]:
        """Bring an archived memory back into the zone its state earns, with a ledger event. Its
        recall count, importance and history stay; its freshness starts again, or the next
        rebalance would forget it at once. A live memory is answered as it is (a retry). Whether
        it came back from the archive now."""
        mid = check.memory_id(memory_id)
        self._placement.flush(tenant)
        with self._placement.locked(tenant):
            m = self._store.get_one(tenant, mid)
            if not m.archived:
                return m, False
            now = self._clock.now()
            m.archived_at = None
            m.last_recalled_at = now
            m.score = float(self._fn.total(m.recall_count, now, m.importance, m.context_score, now))
            m.zone = self._zones.zone_of_score(m.score)
            self._rebalancer.stamped(m, now)
            self._store.append_events([ZoneEvent(
                event_id(mid, repr(now), int(Zone.CLOUD), "restored"), tenant, mid, Zone.CLOUD,
                m.zone, "restored", now, m.content_hash)])
            self._store.save(tenant, [m], RESTORED, archived_too=True)
            self._placement.enforce(tenant, [m], keep_ids={m.id})
        return m, True
