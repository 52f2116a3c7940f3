"""The ledger's records as payload of its own collection (store/ledger_records.py): zone events
(evictions, archiving, restores, deletions, feedback votes) and admin calls."""

from __future__ import annotations

from typing import Any

from celestial_memory.domain.models import AdminEvent, ZoneEvent
from celestial_memory.domain.zones import Zone


def admin_payload(e: AdminEvent) -> dict[str, Any]:
    return {"kind": "admin", "tenant": e.tenant, "method": e.method, "key_id": e.key_id,
            "at": e.at}


def admin_from_payload(point_id: object, p: dict[str, Any]) -> AdminEvent:
    return AdminEvent(id=str(point_id), tenant=p["tenant"], method=p["method"],
                      key_id=p.get("key_id", ""), at=float(p["at"]))


def event_payload(e: ZoneEvent) -> dict[str, Any]:
    return {
        "kind": "event", "tenant": e.tenant, "memory_id": e.memory_id,
        "from_zone": int(e.from_zone), "to_zone": -1 if e.to_zone is None else int(e.to_zone),
        "reason": e.reason, "at": e.at, "content_hash": e.content_hash,
    }


def event_from_payload(point_id: object, p: dict[str, Any]) -> ZoneEvent:
    to = int(p["to_zone"])
    return ZoneEvent(
        id=str(point_id), tenant=p["tenant"], memory_id=p["memory_id"],
        from_zone=Zone(int(p["from_zone"])), to_zone=None if to < 0 else Zone(to),
        reason=p["reason"], at=float(p["at"]), content_hash=p.get("content_hash", ""),
    )
