"""Long-running operations and the reflection trigger's counts, as records of the ledger part
(domain/operations.py; reflection/operations.py runs them). An operation is one point, written
again at each step, so a killed server leaves it as it last was: an operation still held by
a holder (``holder``, the process that runs it) is found on restart and ended
(``unfinished``). ``expires_at`` is the holder's lease while it runs (renewed), and when the
record may be forgotten once it is done; ordered by it, a tenant's ended operations are in the
order they ended (``trim_ended``). A tenant's trigger count is one point per tenant."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from typing import Any

from celestial_memory.domain.operations import (
    PREFIX,
    EntitySummary,
    Failure,
    Insight,
    Operation,
    Reflection,
    ReflectionAsked,
    Stage,
)
from celestial_memory.domain.paging import Cursor
from celestial_memory.store.engine import LEDGER, Engine, Order, Point
from celestial_memory.store.pages import PageReads
from celestial_memory.store.payload import Between, Eq, Ids, Neither

OPERATION, TRIGGER_COUNT = "operation", "reflect_count"
ENDED = "-"  # the holder of an operation that is done: no process holds it
SCAN_LIMIT = 10_000  # unfinished operations read at once (a few per tenant at most)


def _count_id(tenant: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"celestial-reflect-count:{tenant}"))


class OperationsStore(PageReads):
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        # One trim at a time: two that count before either deletes would remove twice over.
        self._trimming = threading.Lock()

    # -- operations ---------------------------------------------------------------------------

    def create(self, op: Operation, holder: str, expires_at: float) -> Operation:
        """Write ``op`` unless its name is taken; the operation stored under it either way
        (a start retried with its request id finds the first one's)."""
        self.engine.upsert(LEDGER, [self._point(op, holder, expires_at)], insert_only=True)
        got = self.read(op.tenant, op.id)
        assert got is not None, "an operation just written is not there"
        return got

    def write(self, op: Operation, holder: str, expires_at: float) -> None:
        self.engine.upsert(LEDGER, [self._point(op, ENDED if op.done else holder, expires_at)])

    def read(self, tenant: str, op_id: str) -> Operation | None:
        """The operation, or None when ``tenant`` has none of that id."""
        recs = self.engine.retrieve(LEDGER, [op_id])
        if not recs or recs[0].payload.get("kind") != OPERATION or \
                recs[0].payload.get("tenant") != tenant:
            return None
        return _operation(recs[0].payload)

    def page(self, tenant: str, size: int,
             cursor: Cursor | None) -> tuple[list[Operation], bool]:
        """A tenant's operations, newest first, after ``cursor``, and whether more follow."""
        records, more = self._time_page(LEDGER, [Eq("tenant", tenant), Eq("kind", OPERATION)],
                                        "at", True, size, cursor)
        ops = [_operation(r.payload) for r in records]
        for op, r in zip(ops, records, strict=True):
            op.created_at = float(r.payload["at"])  # as the index holds it: the next cursor's
        return ops, more

    def unfinished(self) -> list[tuple[Operation, str, float]]:
        """Every operation some process holds: it, its holder and the holder's lease."""
        records, _ = self.engine.scroll(
            LEDGER, [Eq("kind", OPERATION), Neither((Eq("holder", ENDED),))], SCAN_LIMIT)
        return [(_operation(r.payload), str(r.payload.get("holder", "")),
                 float(r.payload.get("expires_at", 0.0))) for r in records]

    def renew(self, op_ids: Sequence[str], holder: str, expires_at: float) -> None:
        """Extend ``holder``'s lease on its operations (those it still holds). An engine may
        match and write apart (edge_engine.py): the caller renews none that may end meanwhile,
        or its end would take the lease for its expiry."""
        if op_ids:
            self.engine.set_payloads(LEDGER, [(i, {"expires_at": expires_at}) for i in op_ids],
                                     [Eq("kind", OPERATION), Eq("holder", holder)])

    def forget_ended(self, now: float) -> None:
        """Remove ended operations kept past their time."""
        self.engine.delete(LEDGER, [Eq("kind", OPERATION), Eq("holder", ENDED),
                                    Between("expires_at", lt=now)])

    def trim_ended(self, tenant: str, keep: int) -> int:
        """Remove ``tenant``'s ended operations but the ``keep`` that ended last, those that
        ended first first; how many went. Running ones are neither counted nor removed."""
        ended = [Eq("tenant", tenant), Eq("kind", OPERATION), Eq("holder", ENDED)]
        with self._trimming:
            extra = self.engine.count(LEDGER, ended) - keep
            if extra <= 0:
                return 0
            # An ended record's expires_at is its end plus the same keeping time for all.
            records, _ = self.engine.scroll(LEDGER, ended, min(extra, SCAN_LIMIT),
                                            payload=False, order=Order("expires_at"))
            if records:
                self.engine.delete(LEDGER, [*ended, Ids(tuple(r.id for r in records))])
            return len(records)

    @staticmethod
    def _point(op: Operation, holder: str, expires_at: float) -> Point:
        return Point(op.id, {}, {"kind": OPERATION, "tenant": op.tenant, "at": op.created_at,
                                 "holder": holder, "expires_at": expires_at,
                                 "operation": _payload(op)})

    # -- the reflection trigger's counts ------------------------------------------------------

    def trigger_counts(self) -> dict[str, int]:
        """Each tenant's new memories since its last automatic reflection (those above 0)."""
        records, _ = self.engine.scroll(LEDGER, [Eq("kind", TRIGGER_COUNT)], SCAN_LIMIT)
        return {str(r.payload["tenant"]): int(r.payload.get("value", 0)) for r in records
                if int(r.payload.get("value", 0)) > 0}

    def write_trigger_count(self, tenant: str, value: int) -> None:
        self.engine.upsert(LEDGER, [Point(_count_id(tenant), {}, {
            "kind": TRIGGER_COUNT, "tenant": tenant, "value": int(value)})])


def _payload(op: Operation) -> dict[str, Any]:
    r, f = op.result, op.failure
    return {
        "name": op.name, "kind": op.kind, "stage": int(op.stage),
        "created_at": op.created_at, "updated_at": op.updated_at, "ended_at": op.ended_at,
        "automatic": op.automatic, "trigger_count": op.trigger_count,
        "dry_run": op.asked.dry_run, "window": op.asked.window,
        "entities": list(op.asked.entities),
        "read": op.read, "calls": op.calls, "planned_calls": op.planned_calls,
        "tokens": op.tokens, "cancel_requested": op.cancel_requested,
        "result": None if r is None else {
            "dry_run": r.dry_run, "read": r.read, "calls": r.calls, "tokens": r.tokens,
            "insights": [[i.id, i.content, i.entity, i.sources, i.created] for i in r.insights],
            "summaries": [[s.entity, s.summary, s.id, s.sources] for s in r.summaries]},
        "failure": None if f is None else [f.error, f.message, f.retry_after_s],
    }


def _operation(p: dict[str, Any]) -> Operation:
    o = p["operation"]
    r, f = o.get("result"), o.get("failure")
    return Operation(
        name=str(o.get("name") or PREFIX), tenant=str(p["tenant"]),
        asked=ReflectionAsked(bool(o.get("dry_run", True)), int(o.get("window", 0)),
                              tuple(o.get("entities") or ())),
        created_at=float(o["created_at"]), updated_at=float(o["updated_at"]),
        kind=str(o.get("kind", "")), stage=Stage(int(o.get("stage", Stage.QUEUED))),
        ended_at=None if o.get("ended_at") is None else float(o["ended_at"]),
        automatic=bool(o.get("automatic")), trigger_count=int(o.get("trigger_count", 0)),
        read=int(o.get("read", 0)), calls=int(o.get("calls", 0)),
        planned_calls=int(o.get("planned_calls", 0)), tokens=int(o.get("tokens", 0)),
        cancel_requested=bool(o.get("cancel_requested")),
        result=None if r is None else Reflection(
            bool(r["dry_run"]), int(r["read"]), int(r["calls"]), int(r["tokens"]),
            [Insight(str(i[0]), str(i[1]), str(i[2]), list(i[3]), bool(i[4]))
             for i in r["insights"]],
            [EntitySummary(str(s[0]), str(s[1]), str(s[2]), list(s[3])) for s in r["summaries"]]),
        failure=None if f is None else Failure(str(f[0]), str(f[1]), float(f[2])),
    )
