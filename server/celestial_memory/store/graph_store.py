"""What connected memory asks of storage (graph/): relations read and written as payload of the
memories they join, the memories that point at some, a session's latest memory, and the
entities memories mention. Every read carries the tenant; every call is one engine round trip
(or a paged scan for the rare reads that can be long). docs/design.md, "Connected memory", says
why relations live on the points rather than in a collection of their own.
"""

from __future__ import annotations

from collections.abc import Sequence

from celestial_memory.domain.models import Edge, Memory
from celestial_memory.store.engine import MEMORIES, Engine, Order
from celestial_memory.store.payload import (
    AnyOf,
    Between,
    Eq,
    conditions,
    edge_fields,
    from_payload,
)

# Reads of relations only: the fields a walk or an erasure needs.
EDGE_PAYLOAD = ["tenant", "edges"]


class GraphStore:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def edges_of(self, tenant: str, ids: Sequence[str]) -> dict[str, list[Edge]]:
        """The relations of each of ``ids`` that ``tenant`` holds (live or archived)."""
        if not ids:
            return {}
        records = self._engine.retrieve(MEMORIES, ids, payload=EDGE_PAYLOAD)
        return {r.id: [Edge.from_dict(d) for d in r.payload.get("edges") or []]
                for r in records if r.payload.get("tenant") == tenant}

    def write_edges(self, tenant: str, edges: dict[str, list[Edge]]) -> None:
        """Set the relations of memories of ``tenant`` (live or archived), one batched write;
        an id that is gone or another tenant's is left alone."""
        if edges:
            self._engine.set_payloads(
                MEMORIES, [(mid, edge_fields(es) or {"edges": [], "edge_ids": []})
                           for mid, es in edges.items()], conditions(tenant, archive=None))

    def pointing_at(self, tenant: str, ids: Sequence[str],
                    page_size: int = 1024) -> dict[str, list[Edge]]:
        """Every memory of ``tenant`` (live or archived) with a relation to or from one of
        ``ids``, with its relations (the indexed ``edge_ids``)."""
        out: dict[str, list[Edge]] = {}
        if not ids:
            return out
        where = conditions(tenant, extra=[AnyOf("edge_ids", tuple(ids))], archive=None)
        offset: str | None = None
        while True:
            records, offset = self._engine.scroll(MEMORIES, where, page_size, offset,
                                                  payload=EDGE_PAYLOAD)
            out.update({r.id: [Edge.from_dict(d) for d in r.payload.get("edges") or []]
                        for r in records})
            if offset is None:
                return out

    def unlink(self, tenant: str, ids: Sequence[str]) -> None:
        """Remove every relation other memories of ``tenant`` hold to or from ``ids`` (before
        those are deleted: an erasure leaves nothing pointing at them)."""
        gone = set(ids)
        holders = self.pointing_at(tenant, ids)
        self.write_edges(tenant, {mid: [e for e in es if e.other not in gone]
                                  for mid, es in holders.items() if mid not in gone})

    def latest_before(self, tenant: str, session_id: str, before: float) -> str | None:
        """The live memory of the session created last before ``before``, if any."""
        where = conditions(tenant, extra=[Eq("session_id", session_id),
                                          Between("created_at", lt=before)], archive=False)
        records, _ = self._engine.scroll(MEMORIES, where, 1, None, payload=["tenant"],
                                         order=Order("created_at", descending=True))
        return records[0].id if records else None

    def entity_counts(self, tenant: str, limit: int) -> list[tuple[str, int]]:
        """The entities live memories of ``tenant`` mention and how many mention each, most
        mentioned first (ties by id), at most ``limit``."""
        counts = self._engine.facet(MEMORIES, "entities", conditions(tenant, archive=False),
                                    limit)
        return sorted(((str(v), int(n)) for v, n in counts), key=lambda c: (-c[1], c[0]))

    def mentioning(self, tenant: str, entity: str, limit: int,
                   order: Order | None = None) -> list[Memory]:
        """Live memories of ``tenant`` that mention ``entity``: the first ``limit`` by
        ``order``, or in id order."""
        where = conditions(tenant, extra=[Eq("entities", entity)], archive=False)
        records, _ = self._engine.scroll(MEMORIES, where, limit, None, order=order)
        return [from_payload(r.id, r.payload) for r in records]

    def count_mentioning(self, tenant: str, entity: str) -> int:
        return self._engine.count(MEMORIES, conditions(tenant, extra=[Eq("entities", entity)],
                                                        archive=False))
