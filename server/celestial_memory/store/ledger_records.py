"""The ledger beside the memories (append-only zone events and admin calls), the rebalance
lease and named markers: a mixin of the repository over its engine (docs/design.md,
"Durability")."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from celestial_memory.domain.models import AdminEvent, ZoneEvent
from celestial_memory.domain.paging import Cursor
from celestial_memory.store.engine import LEDGER, Point
from celestial_memory.store.ledger_payload import (
    admin_from_payload,
    admin_payload,
    event_from_payload,
    event_payload,
)
from celestial_memory.store.pages import PageReads
from celestial_memory.store.payload import (
    Between,
    Either,
    Eq,
    conditions,
    ledger_conditions,
)


def _singleton_id(name: str) -> str:
    """The fixed ledger point of a lease or marker."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"celestial-lease:{name}"))

class LedgerRecords(PageReads):
    # -- the ledger (append-only), the rebalance lease and markers, beside the memories -----

    def append_events(self, events: Sequence[ZoneEvent]) -> None:
        """Write events; an event id already present is left as it is (replaying an event, from
        two replicas or a retried batch, keeps the first)."""
        self.engine.upsert(LEDGER, [Point(e.id, {}, event_payload(e)) for e in events],
                           insert_only=True)

    def read_events(
        self, tenant: str, since: float | None, size: int, memory_id: str = "",
        cursor: Cursor | None = None,
    ) -> tuple[list[ZoneEvent], bool]:
        """Events of ``tenant`` at or after ``since``, oldest first (equal times in id order),
        after ``cursor``, and whether more may follow."""
        records, more = self._time_page(
            LEDGER, conditions(tenant, extra=ledger_conditions("event", since, memory_id)),
            "at", False, size, cursor)
        return [event_from_payload(r.id, r.payload) for r in records], more

    def append_admin(self, event: AdminEvent) -> None:
        self.engine.upsert(LEDGER, [Point(event.id, {}, admin_payload(event))], insert_only=True)

    def read_admin(
        self, tenant: str, since: float | None, size: int, cursor: Cursor | None = None
    ) -> tuple[list[AdminEvent], bool]:
        """Admin events naming ``tenant`` at or after ``since``, as ``read_events``."""
        records, more = self._time_page(
            LEDGER, conditions(tenant, extra=ledger_conditions("admin", since)), "at", False,
            size, cursor)
        return [admin_from_payload(r.id, r.payload) for r in records], more

    def acquire_lease(self, name: str, holder: str, now: float, ttl: float) -> str:
        """Take or renew the lease ``name`` unless another holder's is unexpired; returns the
        holder after the attempt (``holder`` itself on success). Two conditional writes, each
        atomic in the engine: create it if absent, then take it if expired or already ours."""
        pid = _singleton_id(name)
        point = Point(pid, {}, {"kind": "lease", "tenant": "", "holder": holder,
                                "expires_at": now + ttl})
        self.engine.upsert(LEDGER, [point], insert_only=True)
        free_or_mine = Either((Between("expires_at", lt=now), Eq("holder", holder)))
        self.engine.upsert(LEDGER, [point], only_if=[free_or_mine])
        (rec,) = self.engine.retrieve(LEDGER, [pid])
        return str(rec.payload.get("holder", ""))

    def release_lease(self, name: str, holder: str) -> None:
        point = Point(_singleton_id(name), {}, {"kind": "lease", "tenant": "", "holder": "",
                                                "expires_at": 0.0})
        self.engine.upsert(LEDGER, [point], only_if=[Eq("holder", holder)])

    def read_marker(self, name: str) -> float | None:
        """A named number kept beside the memories (e.g. when a tenant was last rebalanced)."""
        recs = self.engine.retrieve(LEDGER, [_singleton_id(f"marker:{name}")])
        return float(recs[0].payload["value"]) if recs and "value" in recs[0].payload else None

    def write_marker(self, name: str, value: float) -> None:
        self.engine.upsert(LEDGER, [Point(_singleton_id(f"marker:{name}"), {},
                                          {"kind": "marker", "tenant": "", "value": float(value)})])

    def read_tuning(self, tenant: str) -> tuple[list[str], list[float], int] | None:
        """A tenant's learned-ranking weights from its votes (ranking/tuning.py), if any."""
        recs = self.engine.retrieve(LEDGER, [_singleton_id(f"tuning:{tenant}")])
        if not recs or recs[0].payload.get("tenant") != tenant:
            return None
        p = recs[0].payload
        return ([str(x) for x in p.get("features", [])], [float(x) for x in p.get("weights", [])],
                int(p.get("votes", 0)))

    def write_tuning(self, tenant: str, features: Sequence[str], weights: Sequence[float],
                     votes: int) -> None:
        self.engine.upsert(LEDGER, [Point(_singleton_id(f"tuning:{tenant}"), {}, {
            "kind": "tuning", "tenant": tenant, "features": list(features),
            "weights": [float(w) for w in weights], "votes": int(votes)})])

    def read_policy(self, tenant: str) -> tuple[str, float] | None:
        """A tenant's turn policy as last saved (policy/keeping.py): its JSON and when."""
        recs = self.engine.retrieve(LEDGER, [_singleton_id(f"policy:{tenant}")])
        if not recs or recs[0].payload.get("tenant") != tenant:
            return None
        p = recs[0].payload
        return str(p.get("state", "")), float(p.get("saved_at", 0.0))

    def write_policy(self, tenant: str, state: str, saved_at: float) -> None:
        self.engine.upsert(LEDGER, [Point(_singleton_id(f"policy:{tenant}"), {}, {
            "kind": "policy", "tenant": tenant, "state": state, "saved_at": float(saved_at)})])
