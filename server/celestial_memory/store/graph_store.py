"""What connected memory asks of storage (graph/): relations read and written as payload of the
memories they join, the memories that point at some, a session's latest memory, and the
entities memories mention. Every read carries the tenant; every call is one engine round trip
(or a paged scan for the rare reads that can be long). docs/design.md, "Connected memory", says
why relations live on the points rather than in a collection of their own.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Sequence

from celestial_memory.domain.models import Edge, Memory
from celestial_memory.store.engine import LEDGER, MEMORIES, Engine, Order, Point
from celestial_memory.store.payload import (
    AnyOf,
    Between,
    Eq,
    Ids,
    conditions,
    edge_fields,
    from_payload,
)

# Reads of relations only: the fields a walk or an erasure needs.
EDGE_PAYLOAD = ["tenant", "edges"]
INTENT = "edges-intent"  # a ledger point: a change of several memories' relations under way
_SEQ = itertools.count()  # the order of one process's intents (only its own can be pending)


TIES = 1024  # memories of one session created at one instant, read to break the tie


class GraphStore:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def holding(self, tenant: str, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` the tenant holds (live or archived): a read of one small field."""
        if not ids:
            return set()
        return {r.id for r in self._engine.retrieve(MEMORIES, ids, payload=["tenant"])
                if r.payload.get("tenant") == tenant}

    def edges_of(self, tenant: str, ids: Sequence[str]) -> dict[str, list[Edge]]:
        """The relations of each of ``ids`` that ``tenant`` holds (live or archived)."""
        if not ids:
            return {}
        records = self._engine.retrieve(MEMORIES, ids, payload=EDGE_PAYLOAD)
        return {r.id: [Edge.from_dict(d) for d in r.payload.get("edges") or []]
                for r in records if r.payload.get("tenant") == tenant}

    def write_edges(self, tenant: str, edges: dict[str, list[Edge]]) -> None:
        """Set the relations of memories of ``tenant`` (live or archived), one batched write;
        an id that is gone or another tenant's is left alone.

        The engines write each memory's payload as its own operation, so a change of several
        (both ends of a relation) is first written whole as an intent in the ledger and that
        intent deleted once every end holds it: a process killed in between finishes the
        change when it next starts (``finish_pending``) instead of leaving a relation known at
        one end only."""
        if not edges:
            return
        updates = [(mid, edge_fields(es) or {"edges": [], "edge_ids": []})
                   for mid, es in edges.items()]
        if len(updates) == 1:
            self._engine.set_payloads(MEMORIES, updates, conditions(tenant, archive=None))
            return
        pid = str(uuid.uuid4())
        self._engine.upsert(LEDGER, [Point(pid, {}, {
            "kind": INTENT, "tenant": tenant, "seq": next(_SEQ),
            "edges": json.dumps({mid: [e.to_dict() for e in es] for mid, es in edges.items()}),
        })])
        self._engine.set_payloads(MEMORIES, updates, conditions(tenant, archive=None))
        self._engine.delete(LEDGER, [Ids((pid,))])

    def finish_pending(self, page_size: int = 256) -> int:
        """Finish every relation change a stopped process had begun (its intents, oldest
        first); how many. Run at start, before any call is served."""
        intents = []
        offset: str | None = None
        while True:
            records, offset = self._engine.scroll(LEDGER, [Eq("kind", INTENT)], page_size,
                                                  offset)
            intents += records
            if offset is None:
                break
        for r in sorted(intents, key=lambda r: (r.payload.get("seq", 0), r.id)):
            tenant = str(r.payload.get("tenant", ""))
            ends = json.loads(str(r.payload.get("edges", "{}")))
            self._engine.set_payloads(MEMORIES, [
                (mid, edge_fields([Edge.from_dict(d) for d in es]) or {"edges": [], "edge_ids": []})
                for mid, es in ends.items()], conditions(tenant, archive=None))
            self._engine.delete(LEDGER, [Ids((r.id,))])
        return len(intents)

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
        """Remove every relation other memories of ``tenant`` hold to or from ``ids``, and the
        relations of ``ids`` themselves, in one change (before those are deleted: an erasure
        leaves nothing pointing at them, and one cut before its delete leaves memories with no
        relations rather than relations known at one end only)."""
        gone = set(ids)
        holders = self.pointing_at(tenant, ids)
        changes = {mid: [e for e in es if e.other not in gone]
                   for mid, es in holders.items() if mid not in gone}
        own = [mid for mid, es in self.edges_of(tenant, list(gone)).items() if es]
        self.write_edges(tenant, {**changes, **{mid: [] for mid in own}})

    def latest_before(self, tenant: str, session_id: str, before: float) -> str | None:
        """The live memory of the session created last before ``before``, if any; of those
        created at that same time, the greatest id, as a batch orders its own (engines break
        a tie in an ordered scroll each their own way)."""
        session = [Eq("session_id", session_id)]
        where = conditions(tenant, extra=[*session, Between("created_at", lt=before)],
                           archive=False)
        records, _ = self._engine.scroll(MEMORIES, where, 1, None, payload=["created_at"],
                                         order=Order("created_at", descending=True))
        if not records:
            return None
        at = float(records[0].payload["created_at"])
        tied = conditions(tenant, extra=[*session, Between("created_at", gte=at, lt=before)],
                          archive=False)
        ties, _ = self._engine.scroll(MEMORIES, tied, TIES, None, payload=["tenant"])
        return max((r.id for r in ties), default=records[0].id)

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
