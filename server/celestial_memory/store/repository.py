"""The memory repository: what the service and the rebalancer ask of storage, written once over
either engine (store/engine.py).

It owns tenant scoping (every read and every field update carries the tenant; ids are global and
an upsert replaces a point whatever its tenant, so callers check ``owners`` before writing a
caller's id, and new memories are written insert-only), the payload layout (store/payload.py),
recall candidates, pages of lists and exports, the ledger, the rebalance lease and markers.
Every call that touches many memories is one batched engine call. The scenario and congruence
suites in
``tests/scenarios`` run it against every engine.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
from celestial_memory.domain.models import (
    AdminEvent,
    HybridQuery,
    Memory,
    MemoryFilter,
    Sparse,
    Vector,
    ZoneEvent,
)
from celestial_memory.domain.selection import Members, Selection
from celestial_memory.domain.validation import MAX_TIME, MIN_TIME
from celestial_memory.domain.zones import Zone
from celestial_memory.errors import NotFound
from celestial_memory.paging import Cursor
from celestial_memory.store.engine import (
    LEDGER,
    MEMORIES,
    Engine,
    Hit,
    Order,
    Part,
    Point,
    Record,
)
from celestial_memory.store.payload import (
    ARCHIVE_ZONE,
    CONTEXT_DENSE,
    DENSE,
    MEMBER_FIELDS,
    SIGNALS,
    AnyOf,
    Between,
    Condition,
    Either,
    Eq,
    admin_from_payload,
    admin_payload,
    conditions,
    event_from_payload,
    event_payload,
    exported_memory,
    from_payload,
    ledger_conditions,
    members,
    payload_fields,
    search_vectors,
    selection_conditions,
    to_payload,
)

log = logging.getLogger(__name__)


def readable(records: Iterable[Record], vectors: bool = False) -> Iterator[Memory]:
    """The records as memories, skipping (and logging, by id) any that cannot be read back or
    sent: one bad record, written by an older version or by hand, must not fail its tenant."""
    for r in records:
        try:
            m = (exported_memory(r.id, r.payload, r.vectors) if vectors
                 else from_payload(r.id, r.payload))
            times = (m.created_at, m.last_recalled_at)
            if not all(math.isfinite(t) and MIN_TIME <= t <= MAX_TIME for t in times) or not (
                    math.isfinite(m.score) and math.isfinite(m.importance)):
                raise ValueError("a time or number out of range")
        except (KeyError, ValueError, TypeError, OverflowError) as exc:
            log.warning("skipping unreadable memory %s: %s", r.id, exc)
            continue
        yield m


@dataclass(slots=True)
class Candidates:
    """A recall's candidates: unique ids in zone order, the zone each was first found in, and
    their exact scores by each of SIGNALS (rows follow ``ids``)."""

    ids: list[str]
    zones: list[int]
    signals: npt.NDArray[np.float64]

    def joined(self, other: Candidates) -> Candidates:
        return Candidates(self.ids + other.ids, self.zones + other.zones,
                          np.concatenate([self.signals.reshape(-1, len(SIGNALS)),
                                          other.signals.reshape(-1, len(SIGNALS))]))


def first_zones(
    zones: Sequence[Zone], per_zone: Sequence[Sequence[Hit]]
) -> dict[Hashable, tuple[int, float]]:
    """Each candidate key, the first zone it was found in (in zone order) and its score."""
    first: dict[Hashable, tuple[int, float]] = {}
    for zone, hits in zip(zones, per_zone, strict=True):
        for k, score in hits:
            first.setdefault(k, (int(zone), score))
    return first


def _settled(signals: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Engine scores with what was not scored settled: a memory stored without a contextual
    vector (its context vector would equal its content vector, payload.search_vectors) scores
    its content cosine there; anything else not scored scores 0."""
    if len(signals):
        signals[:, 1] = np.where(np.isnan(signals[:, 1]), signals[:, 0], signals[:, 1])
    return np.nan_to_num(signals, nan=0.0)


def _singleton_id(name: str) -> str:
    """The fixed ledger point of a lease or marker."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"celestial-lease:{name}"))


class MemoryRepository:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.backend_name = engine.name
        self.dimension = engine.dimension

    # -- memories ----------------------------------------------------------------------------

    def upsert(
        self, memories: Sequence[Memory], insert_only: bool = False, tenant: str | None = None
    ) -> None:
        """Insert or replace memories (``insert_only``: an id that exists is left as it is;
        ``tenant``: an existing point is replaced only if it is that tenant's); each must carry
        its vector and index vectors."""
        self.engine.upsert(MEMORIES, [Point(m.id, search_vectors(m), to_payload(m))
                                      for m in memories], insert_only=insert_only,
                           only_if=[Eq("tenant", tenant)] if tenant is not None else ())

    def get_one(self, tenant: str, memory_id: str) -> Memory:
        """The memory ``memory_id`` of ``tenant``, or NotFound."""
        found = self.get(tenant, [memory_id])
        if memory_id not in found:
            raise NotFound(f"memory {memory_id} not found")
        return found[memory_id]

    def get(
        self, tenant: str, ids: Sequence[str], with_vectors: bool = False
    ) -> dict[str, Memory]:
        """The memories of ``tenant`` among ``ids`` (missing and foreign ones are absent)."""
        records = self.engine.retrieve(MEMORIES, ids, vectors=[DENSE] if with_vectors else ())
        mine = {r.id: r for r in records if r.payload.get("tenant") == tenant}
        out = {m.id: m for m in readable(mine.values())}
        for mid, m in out.items():
            if DENSE in mine[mid].vectors:
                m.vector = np.asarray(mine[mid].vectors[DENSE], dtype=np.float32)
        return out

    def merged_holders(
        self, tenant: str, ids: Sequence[str], live_only: bool = True
    ) -> dict[str, Memory]:
        """For each of ``ids`` that was merged into a memory of ``tenant`` as a repeat (a
        request_id's id, or a consolidated memory's), that memory; live ones only unless not
        ``live_only``."""
        if not ids:
            return {}
        records, _ = self.engine.scroll(
            MEMORIES, conditions(tenant, extra=[AnyOf("repeat_ids", tuple(ids))],
                                 archive=False if live_only else None),
            len(ids), None)
        out: dict[str, Memory] = {}
        for m in readable(records):
            for p in m.merged:
                if p.id in ids:
                    out[p.id] = m
        return out

    def owners(self, ids: Sequence[str]) -> dict[str, str]:
        """The tenant of each id that exists, whatever its tenant."""
        records = self.engine.retrieve(MEMORIES, ids, payload=["tenant"])
        return {r.id: str(r.payload.get("tenant", "")) for r in records}

    def save(self, tenant: str, memories: Sequence[Memory], attributes: Sequence[str],
             archived_too: bool = False) -> None:
        """Write the named attributes of memories of ``tenant`` (models.REINFORCED, EDITED);
        a memory of another tenant, or one in the archive (unless ``archived_too``: a restore),
        is left alone."""
        self.write_fields(tenant, [(m.id, payload_fields(m, attributes)) for m in memories],
                          archived_too)

    def write_fields(self, tenant: str, updates: Sequence[tuple[str, dict[str, Any]]],
                     archived_too: bool = False) -> None:
        """Write payload fields of memories of ``tenant`` by id (a journal's, or ``save``'s); an
        id that is gone, another tenant's or archived (unless ``archived_too``) is left alone:
        a reinforcement written behind never brings back what forgetting archived meanwhile."""
        self.engine.set_payloads(MEMORIES, updates,
                                 conditions(tenant, archive=None if archived_too else False))

    def archive(self, ids: Sequence[str], at: float) -> None:
        """Move memories (ids from a read scoped to their tenant, the rebalancer's) out of the
        zones into the archive: one payload write, points and vectors kept."""
        if ids:
            self.engine.set_payload(MEMORIES, {"zone": ARCHIVE_ZONE, "archived_at": at}, ids=ids)

    def set_zone(
        self, tenant: str, zone: Zone, *, ids: Sequence[str] = (), where: Selection | None = None
    ) -> None:
        """Move memories to ``zone``: those matching ``where``, or ``ids``, which must come from
        a read scoped to ``tenant`` (the rebalancer's own); they are written by id, the fastest
        path, without the tenant filter that request-facing writes carry."""
        if where is not None:
            self.engine.set_payload(MEMORIES, {"zone": int(zone)},
                                    where=selection_conditions(tenant, where))
        elif ids:
            self.engine.set_payload(MEMORIES, {"zone": int(zone)}, ids=ids)

    def delete(self, tenant: str, ids: Sequence[str]) -> int:
        """Delete memories of ``tenant`` (live or archived; points, vectors and all); returns
        how many existed."""
        return self._delete(conditions(tenant, ids=ids)) if ids else 0

    def delete_by_filter(self, tenant: str, flt: MemoryFilter) -> int:
        return self._delete(conditions(tenant, flt))

    def matching(self, tenant: str, flt: MemoryFilter | None = None,
                 ids: Sequence[str] = ()) -> dict[str, Zone]:
        """The ids of ``tenant`` (live or archived) that ``flt`` or ``ids`` name, with the zone
        each is in (an archived one left the cloud)."""
        where = conditions(tenant, flt, ids=ids)
        out: dict[str, Zone] = {}
        offset: str | None = None
        while True:
            records, offset = self.engine.scroll(MEMORIES, where, 20_000, offset, payload=["zone"])
            for r in records:
                z = int(r.payload.get("zone", Zone.CLOUD))
                out[str(r.id)] = Zone.CLOUD if z == ARCHIVE_ZONE else Zone(z)
            if offset is None:
                return out

    def _delete(self, where: Sequence[Condition]) -> int:
        n = self.engine.count(MEMORIES, where)
        self.engine.delete(MEMORIES, where)
        return n

    def erase_from_ledger(self, tenant: str, ids: Sequence[str]) -> None:
        """Blank the content hash of every event of these memories (deleted ones: erasure)."""
        if ids:  # one filtered write for all of them
            self.engine.set_payload(LEDGER, {"content_hash": ""}, where=[
                Eq("tenant", tenant), *ledger_conditions("event", None),
                AnyOf("memory_id", tuple(ids))])

    # -- recall ------------------------------------------------------------------------------

    def search_zones(
        self, tenant: str, query: HybridQuery, zones: Sequence[Zone], flt: MemoryFilter, limit: int
    ) -> list[list[str]]:
        """Candidate ids per zone, best first, in one batch."""
        return [[str(k) for k, _ in hits] for hits in self._search(tenant, query, zones, flt, limit)]

    def _search(
        self, tenant: str, query: HybridQuery, zones: Sequence[Zone], flt: MemoryFilter, limit: int
    ) -> list[list[Hit]]:
        filters = [conditions(tenant, replace(flt, zones=[zone])) for zone in zones]
        return self.engine.fused_search(query, filters, limit)

    def signal_scores(
        self, tenant: str, query: HybridQuery, ids: Sequence[str]
    ) -> npt.NDArray[np.float64]:
        """Exact score of each memory by each of SIGNALS (0 for a foreign or missing id)."""
        return _settled(self.engine.signal_scores(query, [Eq("tenant", tenant)],
                                                  self.engine.keys(ids)))

    def candidates(
        self, tenant: str, query: HybridQuery, zones: Sequence[Zone], flt: MemoryFilter, limit: int
    ) -> Candidates:
        """A recall's two batched round trips: the zone searches, then the exact scores of
        their union (``_rescored``)."""
        first = first_zones(zones, self._search(tenant, query, zones, flt, limit))
        return self._rescored(tenant, query, first)

    def archive_candidates(
        self, tenant: str, query: HybridQuery, flt: MemoryFilter, limit: int
    ) -> Candidates:
        """As ``candidates``, over the archive (one search): their zone is ARCHIVE_ZONE."""
        where = conditions(tenant, replace(flt, zones=[]), archive=True)
        hits = self.engine.fused_search(query, [where], limit)[0]
        return self._rescored(tenant, query, {k: (ARCHIVE_ZONE, score) for k, score in hits})

    def _rescored(
        self, tenant: str, query: HybridQuery, first: dict[Hashable, tuple[int, float]]
    ) -> Candidates:
        """Candidates (engine key -> zone, search score) with their exact scores: one batch.
        The engine's own keys go in unconverted. A query without keywords has its content
        cosines from the search already (``fused_search``), so only the contextual vector is
        rescored."""
        keys = list(first)
        where = [Eq("tenant", tenant)]
        if query.keywords.is_empty():
            signals = self.engine.signal_scores(query, where, keys, columns=(1,))
            signals[:, 0] = [score for _, score in first.values()]
        else:
            signals = self.engine.signal_scores(query, where, keys)
        return Candidates([str(k) for k in keys], [z for z, _ in first.values()],
                          _settled(signals))

    def nearest_live(
        self, tenant: str, vectors: Sequence[Vector], limit: int
    ) -> list[list[tuple[str, float]]]:
        """For each vector, the live memories of ``tenant`` nearest by content, with their
        cosines, best first."""
        hits = self.engine.nearest(vectors, conditions(tenant, archive=False), limit)
        return [[(str(k), float(score)) for k, score in h] for h in hits]

    def contents(self, tenant: str, ids: Sequence[str]) -> dict[str, str]:
        """The content of each live memory of ``tenant`` among ``ids``."""
        records = self.engine.retrieve(MEMORIES, ids, payload=["tenant", "content", "zone"])
        return {str(r.id): str(r.payload["content"]) for r in records
                if r.payload.get("tenant") == tenant and r.payload.get("zone") != ARCHIVE_ZONE}

    def similarities(self, tenant: str, vector: Vector, ids: Sequence[str]) -> dict[str, float]:
        """Cosine similarity of ``vector`` to each of ``ids``, computed by the engine."""
        # The content-vector column of the exact rescoring, without keywords.
        scores = self.signal_scores(tenant, HybridQuery(vector, Sparse([], [])), ids)
        return {mid: float(s) for mid, s in zip(ids, scores[:, 0], strict=True) if s != 0.0}

    # -- reads -------------------------------------------------------------------------------

    def count_by_zone(self, tenant: str) -> dict[Zone, int]:
        counts = dict.fromkeys(Zone, 0)
        for value, n in self.engine.facet(MEMORIES, "zone", conditions(tenant, archive=False),
                                          len(Zone)):
            counts[Zone(int(value))] = n
        return counts

    def count_archived(self, tenant: str) -> int:
        return self.engine.count(MEMORIES, conditions(tenant, archive=True))

    def tenants(self) -> list[str]:
        """Every tenant that has at least one memory."""
        return sorted(str(v) for v, _ in self.engine.facet(MEMORIES, "tenant", [], 1_000_000))

    def scan(self, tenant: str, flt: MemoryFilter, page_size: int = 1024) -> Iterator[list[Memory]]:
        """Every matching memory of ``tenant`` (without vectors), page by page."""
        offset: str | None = None
        where = conditions(tenant, flt, archive=False)
        while True:
            records, offset = self.engine.scroll(MEMORIES, where, page_size, offset)
            if page := list(readable(records)):
                yield page
            if offset is None:
                return

    def recent_page(
        self, tenant: str, flt: MemoryFilter, size: int, cursor: Cursor | None,
        archived: bool = False,
    ) -> tuple[list[Memory], bool]:
        """Memories matching ``flt`` (live ones, or the archive's), newest first (equal times in
        id order), after ``cursor``, and whether more may follow."""
        records, more = self._time_page(MEMORIES, conditions(tenant, flt, archive=archived),
                                        "created_at", True, size, cursor)
        return list(readable(records)), more

    def list_page(
        self, tenant: str, flt: MemoryFilter, size: int, after_id: str | None,
        archived: bool = False,
    ) -> tuple[list[Memory], bool]:
        """Memories matching ``flt`` (live ones, or the archive's) in id order, after
        ``after_id``, and whether more may follow."""
        records, more = self._id_page(MEMORIES, conditions(tenant, flt, archive=archived), size,
                                      after_id)
        return list(readable(records)), more

    def _id_page(
        self, part: Part, where: Sequence[Condition], size: int, after: str | None
    ) -> tuple[list[Record], bool]:
        # The scroll offset is inclusive: one more, for the id already sent.
        records, offset = self.engine.scroll(part, where, size + 1 if after else size, after)
        page = [r for r in records if r.id != after][:size]
        return page, offset is not None or len(records) > len(page) + (after is not None)

    def _time_page(
        self, part: Part, where: Sequence[Condition], field: str, descending: bool, size: int,
        cursor: Cursor | None,
    ) -> tuple[list[Record], bool]:
        """Records in ``field`` order, equal times in id order, after ``cursor`` (the time and
        id of the last record sent). The engine orders by the field alone, so the last time of
        a page is read again in id order: a page may then end inside a group of equal times
        and the next one goes on from its last id."""
        out: list[Record] = []
        if cursor is not None:
            at, after = cursor
            assert at is not None
            out = self._tied(part, where, field, at, after, size)
            if len(out) == size:
                return out, True
            beyond = (Between(field, lt=at) if descending
                      else Between(field, gte=math.nextafter(at, math.inf)))
            where = [*where, beyond]
        want = size - len(out)
        records, _ = self.engine.scroll(part, where, want, order=Order(field, descending))
        for r in records:  # times as the index holds them: cursors and windows must match it
            if r.order_value is not None:
                r.payload[field] = r.order_value
        sign = -1.0 if descending else 1.0

        def key(r: Record) -> tuple[float, str]:
            return sign * float(r.payload[field]), r.id

        if len(records) < want:  # the rest, whole groups of equal times
            return out + sorted(records, key=key), False
        last = float(records[-1].payload[field])
        whole = sorted((r for r in records if float(r.payload[field]) != last), key=key)
        tied = self._tied(part, where, field, last, None, want - len(whole))
        return out + whole + tied, True

    def _tied(
        self, part: Part, where: Sequence[Condition], field: str, at: float, after: str | None,
        size: int,
    ) -> list[Record]:
        """Up to ``size`` records whose ``field`` is exactly ``at``, in id order after ``after``."""
        exact = Between(field, gte=at, lt=math.nextafter(at, math.inf))
        records = self._id_page(part, [*where, exact], size, after)[0]
        for r in records:
            r.payload[field] = at  # the indexed time, which the window matched exactly
        return records

    def export_pages(
        self, tenant: str, after_id: str = "", page_size: int = 512, live_only: bool = False
    ) -> Iterator[list[Memory]]:
        """Every memory of a tenant (archived ones too, unless ``live_only``) in id order, after
        ``after_id``, with ``vector`` and ``index.context_dense`` set (keyword vectors are
        rebuilt from the text on import)."""
        offset: str | None = after_id or None
        where = conditions(tenant, archive=False if live_only else None)
        while True:
            # The scroll offset is inclusive: one more when it is the id already sent.
            limit = page_size + 1 if offset == after_id else page_size
            records, offset = self.engine.scroll(MEMORIES, where, limit, offset,
                                                 vectors=[DENSE, CONTEXT_DENSE])
            page = list(readable((r for r in records if r.id != after_id), vectors=True))
            if page:
                yield page
            if offset is None:
                return

    # -- selections, for the rebalancer ----------------------------------------------------

    def count(self, tenant: str, sel: Selection) -> int:
        return self.engine.count(MEMORIES, selection_conditions(tenant, sel))

    def members(self, tenant: str, sel: Selection, page_size: int = 20_000) -> Members:
        """The state of every selected memory, read page by page into columns."""
        where = selection_conditions(tenant, sel)
        rows: list[tuple[str, dict[str, object]]] = []
        offset: str | None = None
        while True:
            records, offset = self.engine.scroll(MEMORIES, where, page_size, offset,
                                                 payload=MEMBER_FIELDS)
            rows += [(r.id, r.payload) for r in records]
            if offset is None:
                return members(rows)

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

    # -- engine upkeep -----------------------------------------------------------------------

    def optimize(self, min_new: int = 1000) -> bool:
        return self.engine.optimize(min_new)

    def available(self) -> bool:
        return self.engine.available()

    def flush(self) -> None:
        self.engine.flush()

    def close(self) -> None:
        self.engine.close()
