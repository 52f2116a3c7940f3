"""Reading lists of a tenant without reinforcing anything, a page at a time: the newest
memories (Recent), every memory in id order (List) and the ledger (zone events and admin
calls). Each read first writes what is pending (reinforcements, deferred capacity), so a page
shows every write acknowledged before it. Page tokens are the wire's concern (domain/paging.py); here a
page starts after a cursor and says whether more may follow.
"""

from __future__ import annotations

from celestial_memory.config import Settings
from celestial_memory.domain import validation as check
from celestial_memory.domain.models import AdminEvent, Memory, MemoryFilter, ZoneEvent
from celestial_memory.domain.paging import Cursor
from celestial_memory.errors import InvalidArgument
from celestial_memory.store.repository import MemoryRepository
from celestial_memory.zones.placement import Placement


class Listing:
    def __init__(self, settings: Settings, store: MemoryRepository, placement: Placement) -> None:
        self._settings = settings
        self._store = store
        self._placement = placement

    def recent(
        self, tenant: str, flt: MemoryFilter, size: int, cursor: Cursor | None = None,
        archived: bool = False,
    ) -> tuple[list[Memory], bool]:
        """The newest memories matching ``flt`` (e.g. of one session), newest first: live
        ones, or with ``archived`` the archive's."""
        flt = self._checked(flt, archived)
        self._placement.flush(tenant)
        return self._store.recent_page(tenant, flt, size, cursor, archived)

    def in_id_order(
        self, tenant: str, flt: MemoryFilter, size: int, cursor: Cursor | None = None,
        archived: bool = False,
    ) -> tuple[list[Memory], bool]:
        """The memories matching ``flt`` in id order: live ones, or the archive's."""
        flt = self._checked(flt, archived)
        self._placement.flush(tenant)
        return self._store.list_page(tenant, flt, size, None if cursor is None else cursor[1],
                                     archived)

    def _checked(self, flt: MemoryFilter, archived: bool) -> MemoryFilter:
        flt = check.memory_filter(flt, self._settings)
        if archived and flt.zones:
            raise InvalidArgument("filter.zones", "the archive is outside the zones")
        return flt

    def ledger(
        self, tenant: str, since: float | None, size: int, memory_id: str = "",
        events_after: Cursor | None = None, admin_after: Cursor | None = None,
    ) -> tuple[list[ZoneEvent], bool, list[AdminEvent], bool]:
        """Zone events (evictions; archived, restored, purged and deleted memories) of a tenant,
        oldest first, each stream after its cursor, and unless one memory is asked for its
        admin events in the same window; with whether more of each may follow."""
        mid = check.memory_id(memory_id, "memory_id") if memory_id else ""
        check.timestamp(since, "since")
        self._placement.flush(tenant)  # evictions deferred after recalls are in it
        events, more = self._store.read_events(tenant, since, size, mid, events_after)
        if mid:
            return events, more, [], False
        admin, more_admin = self._store.read_admin(tenant, since, size, admin_after)
        return events, more, admin, more_admin
