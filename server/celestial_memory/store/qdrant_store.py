"""The qdrant-client backend: a Qdrant server, cluster or Qdrant Cloud by URL, or ``:memory:``
(qdrant-client's local mode, which runs the same calls without a server; CI uses it).
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

import numpy as np
import numpy.typing as npt
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
from celestial_memory.store.base import Candidates, candidates_of
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
from celestial_memory.store.retry import Retrying
from celestial_memory.store.schema import check_schema
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

_SCHEMAS: dict[str, Any] = {
    "tenant": models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True),
    "integer": models.IntegerIndexParams(
        type=models.IntegerIndexType.INTEGER, lookup=True, range=False
    ),
    "float": models.PayloadSchemaType.FLOAT,
    "keyword": models.PayloadSchemaType.KEYWORD,
}


def _condition(c: Condition) -> Any:
    if isinstance(c, Eq):
        return models.FieldCondition(key=c.key, match=models.MatchValue(value=c.value))
    if isinstance(c, AnyOf):
        return models.FieldCondition(key=c.key, match=models.MatchAny(any=cast(Any, list(c.values))))
    if isinstance(c, Between):
        return models.FieldCondition(key=c.key, range=models.Range(gte=c.gte, lt=c.lt))
    if isinstance(c, Either):
        return models.Filter(should=[_condition(o) for o in c.options])
    return models.HasIdCondition(has_id=list(c.ids))


def _filter(
    tenant: str,
    flt: MemoryFilter | None = None,
    ids: Sequence[str] = (),
    extra: Sequence[Condition] = (),
) -> Any:
    return models.Filter(must=[_condition(c) for c in conditions(tenant, flt, ids, extra)])


def _sparse(v: Sparse) -> models.SparseVector:
    return models.SparseVector(indices=v.indices, values=v.values)


def _signal_queries(query: HybridQuery) -> dict[int, Any]:
    """Column in SIGNALS -> the query scoring it; keyword columns only for a keyword query."""
    out: dict[int, Any] = {0: query.dense.tolist(), 1: query.dense.tolist()}
    if not query.keywords.is_empty():
        out[2] = out[3] = _sparse(query.keywords)
    return out


_EXACT = models.SearchParams(quantization=models.QuantizationSearchParams(ignore=True))


def _prefetches(query: HybridQuery, limit: int, tuned: bool) -> list[models.Prefetch]:
    # Candidates come from the content vector and both keyword vectors (see edge_store.py).
    # ``tuned``: not local mode, which searches exactly and warns about search parameters.
    dense_params = models.SearchParams(
        hnsw_ef=query.ef_for(limit),
        quantization=models.QuantizationSearchParams(
            rescore=True, oversampling=QUANTIZED_OVERSAMPLING),
    ) if tuned else None
    return [
        models.Prefetch(query=q, using=SIGNALS[c], limit=limit,
                        params=dense_params if c == 0 else None)
        for c, q in _signal_queries(query).items() if c != 1
    ]


@dataclass(frozen=True, slots=True)
class Connection:
    """Where and how to reach Qdrant: a URL (``:memory:`` for qdrant-client's local mode), or a
    host with ports; TLS, API key, per-call timeout, and retries for transient failures."""

    url: str = ""
    host: str = ""
    port: int = 6333
    grpc_port: int = 6334
    https: bool = False
    api_key: str | None = None
    timeout_s: float = 10.0
    retries: int = 5
    backoff_s: float = 0.2
    # Used when the collection is created (a cluster): shards, copies of each, and how many
    # copies must acknowledge a write (see the README, "Qdrant cluster").
    shard_number: int | None = None
    replication_factor: int | None = None
    write_consistency_factor: int | None = None

    def describe(self) -> str:
        return self.url or f"{'https' if self.https else 'http'}://{self.host}:{self.port}"


def _client(c: Connection) -> QdrantClient:
    if c.url == ":memory:":
        return QdrantClient(location=":memory:")
    # gRPC preferred: the batched queries and payload updates are smaller and faster there.
    common: dict[str, Any] = {
        "api_key": c.api_key, "prefer_grpc": True, "timeout": max(1, round(c.timeout_s)),
        "https": c.https or None,
    }
    if c.url:
        return QdrantClient(url=c.url, **common)
    return QdrantClient(host=c.host, port=c.port, grpc_port=c.grpc_port, **common)


class QdrantStore:
    def __init__(
        self, connection: Connection | str, dimension: int, collection: str,
        client: QdrantClient | None = None,
    ) -> None:
        conn = Connection(url=connection) if isinstance(connection, str) else connection
        self._conn = conn
        self.dimension = dimension
        self.collection = collection
        self.ledger = f"{collection}_ledger"
        self.backend_name = "qdrant-local" if conn.url == ":memory:" else "qdrant-remote"
        # Local mode searches exactly and warns that search parameters do nothing.
        self._exact = None if conn.url == ":memory:" else _EXACT
        try:
            self._client = cast(QdrantClient, Retrying(
                client or _client(conn), conn.retries, conn.backoff_s
            ))
            self._ensure_schema()
        except (ResponseHandlingException, UnexpectedResponse, ConnectionError) as exc:
            raise StoreUnavailable(f"cannot reach Qdrant at {conn.describe()}: {exc}") from exc

    def _ensure_schema(self) -> None:
        """Create the collections and payload indexes, or check the existing ones: idempotent,
        so every replica runs it on start. A mismatch is refused, never patched over."""
        existing: dict[str, Any] = {}  # payload indexes already there
        if self._client.collection_exists(self.collection):
            info = self._client.get_collection(self.collection)
            check_schema(info, self.collection, self.dimension)
            existing = dict(info.payload_schema or {})
        else:
            self._client.create_collection(
                self.collection,
                vectors_config={
                    # int8 copies for the HNSW search (see edge_store.py _QUANTIZED).
                    DENSE: models.VectorParams(
                        size=self.dimension, distance=models.Distance.COSINE,
                        quantization_config=models.ScalarQuantization(
                            scalar=models.ScalarQuantizationConfig(
                                type=models.ScalarType.INT8, always_ram=True)),
                    ),
                    # Only rescored over candidates, so no HNSW graph (m = 0).
                    CONTEXT_DENSE: models.VectorParams(
                        size=self.dimension, distance=models.Distance.COSINE,
                        hnsw_config=models.HnswConfigDiff(m=0),
                    ),
                },
                sparse_vectors_config={
                    KEYWORDS: models.SparseVectorParams(modifier=models.Modifier.IDF),
                    CONTEXT_KEYWORDS: models.SparseVectorParams(modifier=models.Modifier.IDF),
                },
                **self._layout(),
            )
        if not self._client.collection_exists(self.ledger):
            self._client.create_collection(self.ledger, vectors_config={}, **self._layout())
        with warnings.catch_warnings():
            # Local mode ignores payload indexes and says so; the server needs them.
            warnings.filterwarnings("ignore", "Payload indexes have no effect")
            for field, kind in INDEXES.items():
                if field not in existing:
                    self._client.create_payload_index(self.collection, field, _SCHEMAS[kind])
            for field, kind in LEDGER_INDEXES.items():
                self._client.create_payload_index(self.ledger, field, _SCHEMAS[kind])

    def _layout(self) -> dict[str, Any]:
        c = self._conn
        layout = {"shard_number": c.shard_number, "replication_factor": c.replication_factor,
                  "write_consistency_factor": c.write_consistency_factor}
        return {k: v for k, v in layout.items() if v is not None}

    def upsert(self, memories: Sequence[Memory]) -> None:
        points = []
        for m in memories:
            points.append(models.PointStruct(
                id=m.id, vector=search_vectors(m, _sparse), payload=to_payload(m)))
        if points:
            self._client.upsert(self.collection, points=points, wait=True)

    def get(
        self, tenant: str, ids: Sequence[str], with_vectors: bool = False
    ) -> dict[str, Memory]:
        if not ids:
            return {}
        records = self._client.retrieve(
            self.collection, ids=list(ids), with_payload=True,
            with_vectors=[DENSE] if with_vectors else False,
        )
        out: dict[str, Memory] = {}
        for r in records:
            if r.payload is None or r.payload.get("tenant") != tenant:
                continue
            vec = None
            if with_vectors and isinstance(r.vector, dict):
                vec = np.asarray(r.vector[DENSE], dtype=np.float32)
            m = from_payload(r.id, r.payload, vec)
            out[m.id] = m
        return out

    def owners(self, ids: Sequence[str]) -> dict[str, str]:
        if not ids:
            return {}
        records = self._client.retrieve(
            self.collection, ids=list(ids), with_payload=["tenant"], with_vectors=False
        )
        return {str(r.id): str((r.payload or {}).get("tenant", "")) for r in records}

    def set_fields(self, tenant: str, updates: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        if not updates:
            return
        ops = [
            models.SetPayloadOperation(
                set_payload=models.SetPayload(payload=dict(f), filter=_filter(tenant, ids=[pid]))
            )
            for pid, f in updates
        ]
        self._client.batch_update_points(self.collection, update_operations=ops, wait=True)

    def delete(self, tenant: str, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        return self._delete(_filter(tenant, ids=ids))

    def delete_by_filter(self, tenant: str, flt: MemoryFilter) -> int:
        return self._delete(_filter(tenant, flt))

    def _delete(self, f: Any) -> int:
        n = self._client.count(self.collection, count_filter=f, exact=True).count
        self._client.delete(self.collection, points_selector=models.FilterSelector(filter=f))
        return int(n)

    def search_zones(
        self, tenant: str, query: HybridQuery, zones: Sequence[Zone], flt: MemoryFilter, limit: int
    ) -> list[list[str]]:
        prefetches = _prefetches(query, limit, self._exact is not None)  # the same for every zone
        requests = [
            models.QueryRequest(
                prefetch=prefetches, query=models.FusionQuery(fusion=models.Fusion.RRF),
                filter=_filter(tenant, replace(flt, zones=[zone])), limit=limit, with_payload=False,
            )
            for zone in zones
        ]
        responses = self._client.query_batch_points(self.collection, requests=requests)
        return [[str(p.id) for p in r.points] for r in responses]

    def candidates(
        self, tenant: str, query: HybridQuery, zones: Sequence[Zone], flt: MemoryFilter, limit: int
    ) -> Candidates:
        return candidates_of(self, tenant, query, zones, flt, limit)

    def signal_scores(
        self, tenant: str, query: HybridQuery, ids: Sequence[str]
    ) -> npt.NDArray[np.float64]:
        scores = np.zeros((len(ids), len(SIGNALS)))
        if not ids:
            return scores
        f = _filter(tenant, ids=ids)
        queries = _signal_queries(query)
        responses = self._client.query_batch_points(self.collection, requests=[
            models.QueryRequest(query=q, using=SIGNALS[c], filter=f, limit=len(ids),
                                with_payload=False, params=self._exact)
            for c, q in queries.items()
        ])
        row = {mid: i for i, mid in enumerate(ids)}
        for col, r in zip(queries, responses, strict=True):
            for p in r.points:
                scores[row[str(p.id)], col] = p.score
        return scores

    def similarities(self, tenant: str, vector: Vector, ids: Sequence[str]) -> dict[str, float]:
        if not ids:
            return {}
        r = self._client.query_points(
            self.collection, query=vector.tolist(), using=DENSE,
            query_filter=_filter(tenant, ids=ids), limit=len(ids), with_payload=False,
            search_params=self._exact,
        )
        return {str(p.id): float(p.score) for p in r.points}

    def count_by_zone(self, tenant: str) -> dict[Zone, int]:
        resp = self._client.facet(
            self.collection, key="zone", facet_filter=_filter(tenant), limit=len(Zone), exact=True
        )
        counts = dict.fromkeys(Zone, 0)
        for hit in resp.hits:
            counts[Zone(int(hit.value))] = hit.count
        return counts

    def tenants(self) -> list[str]:
        resp = self._client.facet(self.collection, key="tenant", limit=1_000_000, exact=True)
        return sorted(str(hit.value) for hit in resp.hits)

    def scan(
        self, tenant: str, flt: MemoryFilter, page_size: int = 1024
    ) -> Iterator[list[Memory]]:
        offset: Any = None
        f = _filter(tenant, flt)
        while True:
            records, offset = self._client.scroll(
                self.collection, scroll_filter=f, limit=page_size, offset=offset,
                with_payload=True, with_vectors=False,
            )
            if records:
                yield [from_payload(r.id, r.payload or {}) for r in records]
            if offset is None:
                return

    def recent(self, tenant: str, flt: MemoryFilter, limit: int) -> list[Memory]:
        records, _ = self._client.scroll(
            self.collection, scroll_filter=_filter(tenant, flt), limit=limit, with_payload=True,
            order_by=models.OrderBy(key="created_at", direction=models.Direction.DESC),
        )
        return [from_payload(r.id, r.payload or {}) for r in records]

    def export_pages(
        self, tenant: str, after_id: str = "", page_size: int = 512
    ) -> Iterator[list[Memory]]:
        offset: Any = after_id or None
        f = _filter(tenant)
        while True:
            records, offset = self._client.scroll(
                self.collection, scroll_filter=f, offset=offset, with_payload=True,
                limit=page_size + 1 if offset == after_id else page_size,
                with_vectors=[DENSE, CONTEXT_DENSE],
            )
            page = [exported_memory(r.id, r.payload or {}, cast(dict[str, Any], r.vector))
                    for r in records if str(r.id) != after_id]
            if page:
                yield page
            if offset is None:
                return

    def count_where(self, tenant: str, conds: Sequence[Condition]) -> int:
        f = _filter(tenant, extra=conds)
        return int(self._client.count(self.collection, count_filter=f, exact=True).count)

    def set_where(self, tenant: str, conds: Sequence[Condition], fields: Mapping[str, Any]) -> None:
        self._client.set_payload(
            self.collection, payload=dict(fields), points=_filter(tenant, extra=conds), wait=True
        )

    def set_same(self, tenant: str, ids: Sequence[str], fields: Mapping[str, Any]) -> None:
        if ids:
            self._client.set_payload(self.collection, payload=dict(fields), points=list(ids),
                                     wait=True)

    def scan_fields(
        self, tenant: str, fields: Sequence[str], conds: Sequence[Condition] = (),
        page_size: int = 20_000,
    ) -> Iterator[list[tuple[str, dict[str, Any]]]]:
        offset: Any = None
        f = _filter(tenant, extra=conds)
        while True:
            records, offset = self._client.scroll(
                self.collection, scroll_filter=f, limit=page_size, offset=offset,
                with_payload=list(fields), with_vectors=False,
            )
            if records:
                yield [(str(r.id), r.payload or {}) for r in records]
            if offset is None:
                return

    # -- ledger and lease

    def append_events(self, events: Sequence[ZoneEvent]) -> None:
        if events:
            points = [models.PointStruct(id=e.id, vector={}, payload=event_payload(e))
                      for e in events]
            # INSERT_ONLY: replaying an event (two replicas, a retried batch) keeps the first.
            self._client.upsert(self.ledger, points=points, wait=True,
                                update_mode=models.UpdateMode.INSERT_ONLY)

    def read_events(
        self, tenant: str, since: float | None, limit: int, memory_id: str = ""
    ) -> list[ZoneEvent]:
        conds = event_conditions(since, memory_id)
        records, _ = self._client.scroll(
            self.ledger, scroll_filter=_filter(tenant, extra=conds), limit=limit,
            with_payload=True, order_by=models.OrderBy(key="at", direction=models.Direction.ASC),
        )
        return [event_from_payload(r.id, r.payload or {}) for r in records]

    def acquire_lease(self, name: str, holder: str, now: float, ttl: float) -> str:
        pid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"celestial-lease:{name}"))
        point = models.PointStruct(id=pid, vector={}, payload={
            "kind": "lease", "tenant": "", "holder": holder, "expires_at": now + ttl})
        free_or_mine = models.Filter(should=[
            models.FieldCondition(key="expires_at", range=models.Range(lt=now)),
            models.FieldCondition(key="holder", match=models.MatchValue(value=holder)),
        ])
        self._client.upsert(self.ledger, points=[point], wait=True,
                            update_mode=models.UpdateMode.INSERT_ONLY)
        self._client.upsert(self.ledger, points=[point], wait=True, update_filter=free_or_mine)
        (rec,) = self._client.retrieve(self.ledger, ids=[pid], with_payload=True)
        return str((rec.payload or {}).get("holder", ""))

    def release_lease(self, name: str, holder: str) -> None:
        pid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"celestial-lease:{name}"))
        point = models.PointStruct(id=pid, vector={}, payload={
            "kind": "lease", "tenant": "", "holder": "", "expires_at": 0.0})
        mine = models.Filter(must=[
            models.FieldCondition(key="holder", match=models.MatchValue(value=holder))])
        self._client.upsert(self.ledger, points=[point], wait=True, update_filter=mine)

    def read_marker(self, name: str) -> float | None:
        pid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"celestial-lease:marker:{name}"))
        recs = self._client.retrieve(self.ledger, ids=[pid], with_payload=True)
        return float(recs[0].payload["value"]) if recs and recs[0].payload else None

    def write_marker(self, name: str, value: float) -> None:
        pid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"celestial-lease:marker:{name}"))
        point = models.PointStruct(id=pid, vector={}, payload={
            "kind": "marker", "tenant": "", "value": float(value)})
        self._client.upsert(self.ledger, points=[point], wait=True)

    def optimize(self, min_new: int = 1000) -> bool:
        """A Qdrant server builds its indexes itself (its optimizers); nothing to do."""
        return False

    def flush(self) -> None:
        """Writes are sent with wait=True; nothing is buffered here."""

    def close(self) -> None:
        self._client.close()
