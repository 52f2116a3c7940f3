"""The embedded backend: Qdrant Edge in-process, shards on disk under the data directory.

Two shards: the memories (``<collection>``) and the ledger with the rebalance lease
(``<collection>_ledger``, no vectors). Only one process may open a shard directory (Qdrant Edge
0.9.0); shards are flushed on close.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import qdrant_edge as qe
from celestial_memory.domain.models import (
    HybridQuery,
    Memory,
    MemoryFilter,
    Sparse,
    Vector,
    ZoneEvent,
)
from celestial_memory.domain.zones import Zone
from celestial_memory.errors import StoreUnavailable
from celestial_memory.store.base import Candidates, first_zones
from celestial_memory.store.payload import (
    CONTEXT_DENSE,
    CONTEXT_KEYWORDS,
    DENSE,
    INDEXES,
    KEYWORDS,
    LEDGER_INDEXES,
    QUANTIZED_OVERSAMPLING,
    SIGNALS,
    AnyOf,
    Between,
    Condition,
    Either,
    Eq,
    conditions,
    event_conditions,
    event_from_payload,
    event_payload,
    exported_memory,
    from_payload,
    search_vectors,
    to_payload,
)

_INDEX_PARAMS: dict[str, Any] = {
    "tenant": qe.KeywordIndexParams(is_tenant=True),
    # Zone and pinned are matched by value only; a range structure would double the cost of
    # every zone write (measured: 300 -> 150 ms per 10,000 moves at 200,000 memories).
    "integer": qe.IntegerIndexParams(lookup=True, range=False),
    "float": qe.FloatIndexParams(),
    "keyword": qe.KeywordIndexParams(),
}


_TENANT_ONLY = qe.PayloadSelector.Include(["tenant"])


def _condition(c: Condition) -> Any:
    if isinstance(c, Eq):
        return qe.FieldCondition(c.key, match=qe.MatchValue(c.value))
    if isinstance(c, AnyOf):
        return qe.FieldCondition(c.key, match=qe.MatchAny(cast(Any, list(c.values))))
    if isinstance(c, Between):
        return qe.FieldCondition(c.key, range=qe.RangeFloat(gte=c.gte, lt=c.lt))
    if isinstance(c, Either):
        return qe.Filter(should=[_condition(o) for o in c.options])
    return qe.HasIdCondition(set(c.ids))


def _filter(
    tenant: str,
    flt: MemoryFilter | None = None,
    ids: Sequence[str] = (),
    extra: Sequence[Condition] = (),
) -> Any:
    return qe.Filter(must=[_condition(c) for c in conditions(tenant, flt, ids, extra)])


def _sparse(v: Sparse) -> Any:
    return qe.SparseVector(v.indices, v.values)


# The content vector's HNSW search runs on int8 copies (4x smaller, always in RAM), then rescores
# twice the limit with the float vectors: at 100,000 memories this cut the five zone searches
# from 7.0 to 5.8 ms and kept 98.9-100% of their exact top 30. Rescoring over candidates reads the
# float vectors only (``_EXACT``): relevance needs the true cosine.
_QUANTIZED = qe.QuantizationSearchParams(rescore=True, oversampling=QUANTIZED_OVERSAMPLING)
_EXACT = qe.SearchParams(quantization=qe.QuantizationSearchParams(ignore=True))


def _signal_queries(query: HybridQuery) -> dict[int, Any]:
    """Column in SIGNALS -> the query scoring it; keyword columns only for a keyword query."""
    dense = query.dense.tolist()
    out = {0: qe.Query.Nearest(dense, using=DENSE), 1: qe.Query.Nearest(dense, using=CONTEXT_DENSE)}
    if not query.keywords.is_empty():
        kw = _sparse(query.keywords)
        out[2] = qe.Query.Nearest(kw, using=KEYWORDS)
        out[3] = qe.Query.Nearest(kw, using=CONTEXT_KEYWORDS)
    return out


def _prefetches(query: HybridQuery, limit: int) -> list[Any]:
    # Candidates come from the content vector and both keyword vectors; the contextual dense
    # vector is only rescored (it has no HNSW graph).
    dense = qe.SearchParams(hnsw_ef=query.ef_for(limit), quantization=_QUANTIZED)
    return [
        qe.Prefetch(limit=limit, query=q, params=dense if c == 0 else None)
        for c, q in _signal_queries(query).items() if c != 1
    ]


def _open(path: Path, config: Any, indexes: Mapping[str, str]) -> Any:
    try:
        if (path / "edge_config.json").exists():
            shard = qe.EdgeShard.load(str(path), config)
        else:
            path.mkdir(parents=True, exist_ok=True)
            shard = qe.EdgeShard.create(str(path), config)
    except Exception as exc:  # the engine reports lock and format problems as plain errors
        raise StoreUnavailable(f"cannot open the embedded store at {path}: {exc}") from exc
    existing = set(shard.info().payload_schema)
    for field, kind in indexes.items():
        if field not in existing:
            shard.update(qe.UpdateOperation.create_field_index(field, _INDEX_PARAMS[kind]))
    return shard


class EdgeStore:
    backend_name = "edge"

    def __init__(self, path: Path, dimension: int) -> None:
        self.dimension = dimension
        self._path = path
        config = qe.EdgeConfig(
            vectors={
                DENSE: qe.EdgeVectorParams(
                    size=dimension, distance=qe.Distance.Cosine,
                    quantization_config=qe.ScalarQuantizationConfig(
                        qe.ScalarType.Int8, always_ram=True),
                ),
                # Only rescored over candidates (HasId filter), so no HNSW graph: m = 0.
                CONTEXT_DENSE: qe.EdgeVectorParams(
                    size=dimension, distance=qe.Distance.Cosine,
                    hnsw_config=qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10_000),
                ),
            },
            sparse_vectors={
                KEYWORDS: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf),
                CONTEXT_KEYWORDS: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf),
            },
            # Payload pages kept in RAM: a full rebalance and capacity checks read many payloads.
            payload_memory=qe.Memory.Cached,
        )
        self._shard = _open(path, config, INDEXES)
        ledger_config = qe.EdgeConfig(sparse_vectors={"_": qe.EdgeSparseVectorParams()})
        self._ledger = _open(path.with_name(path.name + "_ledger"), ledger_config, LEDGER_INDEXES)
        # The engine is thread-safe; the lock keeps count-then-delete sequences whole.
        self._write_lock = threading.Lock()
        # Points upserted since the last index build (optimize); a reopened store builds once.
        self._unindexed = 1_000_000

    def _update(self, op: Any, shard: Any = None) -> None:
        try:
            (shard or self._shard).update(op)
        except Exception as exc:
            raise StoreUnavailable(f"embedded store refused a write: {exc}") from exc

    def upsert(self, memories: Sequence[Memory]) -> None:
        points = []
        for m in memories:
            if m.vector is None:
                raise ValueError(f"memory {m.id} has no vector")
            points.append(qe.Point(m.id, search_vectors(m, _sparse), to_payload(m)))
        if points:
            self._update(qe.UpdateOperation.upsert_points(points))
            self._unindexed += len(points)

    def get(
        self, tenant: str, ids: Sequence[str], with_vectors: bool = False
    ) -> dict[str, Memory]:
        if not ids:
            return {}
        records = self._shard.retrieve(
            list(ids), with_payload=True, with_vector=[DENSE] if with_vectors else False
        )
        out: dict[str, Memory] = {}
        for r in records:
            if r.payload is None or r.payload.get("tenant") != tenant:
                continue
            vec = None
            if with_vectors and r.vector is not None:
                vec = np.asarray(cast(dict[str, Any], r.vector)[DENSE], dtype=np.float32)
            m = from_payload(r.id, r.payload, vec)
            out[m.id] = m
        return out

    def owners(self, ids: Sequence[str]) -> dict[str, str]:
        if not ids:
            return {}
        records = self._shard.retrieve(list(ids), with_payload=_TENANT_ONLY, with_vector=False)
        return {str(r.id): str((r.payload or {}).get("tenant", "")) for r in records}

    def set_fields(self, tenant: str, updates: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        # Scoped by tenant: one read of the owners, then writes by id, so a foreign id is
        # never touched.
        owners = self.owners([pid for pid, _ in updates])
        for point_id, fields in updates:
            if owners.get(point_id) == tenant:
                self._update(qe.UpdateOperation.set_payload([point_id], dict(fields)))

    def delete(self, tenant: str, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        return self._delete(_filter(tenant, ids=ids))

    def delete_by_filter(self, tenant: str, flt: MemoryFilter) -> int:
        return self._delete(_filter(tenant, flt))

    def _delete(self, f: Any) -> int:
        with self._write_lock:
            n = self._shard.count(qe.CountRequest(filter=f, exact=True))
            self._update(qe.UpdateOperation.delete_points_by_filter(f))
        return int(n)

    def search_zones(
        self, tenant: str, query: HybridQuery, zones: Sequence[Zone], flt: MemoryFilter, limit: int
    ) -> list[list[str]]:
        return [[str(k) for k in keys] for keys in self._search_zones(tenant, query, zones, flt, limit)]

    def _search_zones(
        self, tenant: str, query: HybridQuery, zones: Sequence[Zone], flt: MemoryFilter, limit: int
    ) -> list[list[uuid.UUID]]:
        prefetches = _prefetches(query, limit)  # built once: each converts the query vector
        fusion = cast(Any, qe.Fusion.Rrf(k=60))
        requests = [
            qe.QueryRequest(
                limit=limit, prefetches=prefetches, query=fusion,
                filter=_filter(tenant, replace(flt, zones=[zone])), with_payload=False,
            )
            for zone in zones
        ]
        batches = self._shard.query_batch(qe.QueryBatchRequest(requests))
        return [[cast(uuid.UUID, p.id) for p in b] for b in batches]

    def candidates(
        self, tenant: str, query: HybridQuery, zones: Sequence[Zone], flt: MemoryFilter, limit: int
    ) -> Candidates:
        # The engine's UUID objects go from the first round trip into the second as they are:
        # converting ids to strings and back cost about a millisecond per recall (issue 4).
        first = first_zones(zones, self._search_zones(tenant, query, zones, flt, limit))
        keys = list(first)
        return Candidates([str(k) for k in keys], list(first.values()),
                          self._signal_scores(tenant, query, keys))

    def signal_scores(
        self, tenant: str, query: HybridQuery, ids: Sequence[str]
    ) -> npt.NDArray[np.float64]:
        return self._signal_scores(tenant, query, [uuid.UUID(mid) for mid in ids])

    def _signal_scores(
        self, tenant: str, query: HybridQuery, keys: Sequence[uuid.UUID]
    ) -> npt.NDArray[np.float64]:
        scores = np.zeros((len(keys), len(SIGNALS)))
        if not keys:
            return scores
        f = qe.Filter(must=[_condition(Eq("tenant", tenant)), qe.HasIdCondition(set(keys))])
        queries = _signal_queries(query)
        batches = self._shard.query_batch(qe.QueryBatchRequest([
            qe.QueryRequest(limit=len(keys), query=q, filter=f, with_payload=False, params=_EXACT)
            for q in queries.values()
        ]))
        row = {k: i for i, k in enumerate(keys)}
        for col, b in zip(queries, batches, strict=True):
            for p in b:
                scores[row[cast(uuid.UUID, p.id)], col] = p.score
        return scores

    def similarities(self, tenant: str, vector: Vector, ids: Sequence[str]) -> dict[str, float]:
        if not ids:
            return {}
        points = self._shard.query(
            qe.QueryRequest(
                limit=len(ids), query=qe.Query.Nearest(vector.tolist(), using=DENSE),
                filter=_filter(tenant, ids=ids), with_payload=False, params=_EXACT,
            )
        )
        return {str(p.id): float(p.score) for p in points}

    def count_by_zone(self, tenant: str) -> dict[Zone, int]:
        resp = self._shard.facet(
            qe.FacetRequest(key="zone", limit=len(Zone), exact=True, filter=_filter(tenant))
        )
        counts = dict.fromkeys(Zone, 0)
        for hit in resp.hits:
            counts[Zone(int(hit.value))] = hit.count
        return counts

    def tenants(self) -> list[str]:
        resp = self._shard.facet(qe.FacetRequest(key="tenant", limit=1_000_000, exact=True))
        return sorted(str(hit.value) for hit in resp.hits)

    def scan(
        self, tenant: str, flt: MemoryFilter, page_size: int = 1024
    ) -> Iterator[list[Memory]]:
        for page in self._scroll(_filter(tenant, flt), True, page_size):
            yield [from_payload(pid, p) for pid, p in page]

    def recent(self, tenant: str, flt: MemoryFilter, limit: int) -> list[Memory]:
        records, _ = self._shard.scroll(qe.ScrollRequest(
            limit=limit, filter=_filter(tenant, flt), with_payload=True,
            order_by=qe.OrderBy("created_at", direction=qe.Direction.Desc),
        ))
        return [from_payload(r.id, r.payload or {}) for r in records]

    def export_pages(
        self, tenant: str, after_id: str = "", page_size: int = 512
    ) -> Iterator[list[Memory]]:
        offset: Any = after_id or None
        f = _filter(tenant)
        while True:
            records, offset = self._shard.scroll(qe.ScrollRequest(
                offset=offset, limit=page_size + 1 if offset == after_id else page_size,
                filter=f, with_payload=True, with_vector=[DENSE, CONTEXT_DENSE],
            ))
            page = [exported_memory(r.id, r.payload or {}, cast(dict[str, Any], r.vector))
                    for r in records if str(r.id) != after_id]
            if page:
                yield page
            if offset is None:
                return

    def _scroll(self, f: Any, payload: Any, page_size: int) -> Iterator[list[tuple[str, Any]]]:
        offset: Any = None
        while True:
            records, offset = self._shard.scroll(
                qe.ScrollRequest(offset=offset, limit=page_size, filter=f, with_payload=payload)
            )
            if records:
                yield [(str(r.id), r.payload or {}) for r in records]
            if offset is None:
                return

    def count_where(self, tenant: str, conds: Sequence[Condition]) -> int:
        f = _filter(tenant, extra=conds)
        return int(self._shard.count(qe.CountRequest(filter=f, exact=True)))

    def set_where(self, tenant: str, conds: Sequence[Condition], fields: Mapping[str, Any]) -> None:
        self._update(qe.UpdateOperation.set_payload_by_filter(_filter(tenant, extra=conds), dict(fields)))

    def set_same(self, tenant: str, ids: Sequence[str], fields: Mapping[str, Any]) -> None:
        if ids:
            self._update(qe.UpdateOperation.set_payload(list(ids), dict(fields)))

    def scan_fields(
        self, tenant: str, fields: Sequence[str], conds: Sequence[Condition] = (),
        page_size: int = 20_000,
    ) -> Iterator[list[tuple[str, dict[str, Any]]]]:
        selector = qe.PayloadSelector.Include(list(fields))
        yield from self._scroll(_filter(tenant, extra=conds), selector, page_size)

    # -- ledger and lease

    def append_events(self, events: Sequence[ZoneEvent]) -> None:
        if events:
            points = [qe.Point(e.id, {}, event_payload(e)) for e in events]
            # InsertOnly: replaying an event (two replicas, a retried batch) keeps the first.
            op = qe.UpdateOperation.upsert_points(points, update_mode=qe.UpdateMode.InsertOnly)
            self._update(op, self._ledger)

    def read_events(
        self, tenant: str, since: float | None, limit: int, memory_id: str = ""
    ) -> list[ZoneEvent]:
        conds = event_conditions(since, memory_id)
        records, _ = self._ledger.scroll(
            qe.ScrollRequest(
                limit=limit, filter=_filter(tenant, extra=conds), with_payload=True,
                order_by=qe.OrderBy("at", direction=qe.Direction.Asc),
            )
        )
        return [event_from_payload(r.id, r.payload or {}) for r in records]

    def acquire_lease(self, name: str, holder: str, now: float, ttl: float) -> str:
        pid = _lease_id(name)
        point = qe.Point(pid, {}, {"kind": "lease", "tenant": "", "holder": holder,
                                    "expires_at": now + ttl})
        free_or_mine = qe.Filter(should=[
            qe.FieldCondition("expires_at", range=qe.RangeFloat(lt=now)),
            qe.FieldCondition("holder", match=qe.MatchValue(holder)),
        ])
        with self._write_lock:
            self._update(qe.UpdateOperation.upsert_points(
                [point], update_mode=qe.UpdateMode.InsertOnly), self._ledger)
            self._update(qe.UpdateOperation.upsert_points([point], condition=free_or_mine),
                         self._ledger)
            (rec,) = self._ledger.retrieve([pid], with_payload=True, with_vector=False)
        return str((rec.payload or {}).get("holder", ""))

    def release_lease(self, name: str, holder: str) -> None:
        mine = qe.Filter(must=[qe.FieldCondition("holder", match=qe.MatchValue(holder))])
        point = qe.Point(_lease_id(name), {}, {"kind": "lease", "tenant": "", "holder": "",
                                                "expires_at": 0.0})
        self._update(qe.UpdateOperation.upsert_points([point], condition=mine), self._ledger)

    def read_marker(self, name: str) -> float | None:
        recs = self._ledger.retrieve([_lease_id(f"marker:{name}")], with_payload=True,
                                     with_vector=False)
        return float(recs[0].payload["value"]) if recs and recs[0].payload else None

    def write_marker(self, name: str, value: float) -> None:
        point = qe.Point(_lease_id(f"marker:{name}"), {},
                         {"kind": "marker", "tenant": "", "value": float(value)})
        self._update(qe.UpdateOperation.upsert_points([point]), self._ledger)

    def optimize(self, min_new: int = 1000) -> bool:
        """Build the vector indexes (HNSW) over what was written since the last build: minutes
        at 100,000 memories, so the server runs it in a worker thread, off the request path
        (server.py). Points written since the last build are searched exhaustively meanwhile,
        which costs little below about a thousand. Returns whether it built anything."""
        if self._unindexed < min_new:
            return False
        self._unindexed = 0
        self._shard.optimize()
        return True

    def flush(self) -> None:
        self._shard.flush()
        self._ledger.flush()

    def close(self) -> None:
        for shard in (self._shard, self._ledger):
            shard.flush()
            shard.close()


def _lease_id(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"celestial-lease:{name}"))
