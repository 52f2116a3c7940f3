"""The qdrant-client engine: a Qdrant server, cluster or Qdrant Cloud by URL, or ``:memory:``
(qdrant-client's local mode, which runs the same calls without a server; CI uses it).
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from celestial_memory.domain.models import HybridQuery, Sparse, Vector
from celestial_memory.errors import StoreUnavailable
from celestial_memory.store import engine as en
from celestial_memory.store.breaker import CircuitBreaker, Guarded
from celestial_memory.store.payload import (
    INDEXES,
    LEDGER_INDEXES,
    PASSAGES,
    QUANTIZED_OVERSAMPLING,
    SIGNALS,
    Condition,
)
from celestial_memory.store.proxy import MethodProxy
from celestial_memory.store.retry import Retrying, store_fault, unavailable
from celestial_memory.store.schema import check_schema, sparse_vectors_config, vectors_config
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
# With the payload on disk, as on the embedded store (edge_engine.py _INDEX_PARAMS_ON_DISK).
_SCHEMAS_ON_DISK: dict[str, Any] = {
    **_SCHEMAS,
    "float": models.FloatIndexParams(type=models.FloatIndexType.FLOAT, on_disk=True),
    "keyword": models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, on_disk=True),
}
log = logging.getLogger(__name__)
_EXACT = models.SearchParams(quantization=models.QuantizationSearchParams(ignore=True))


_FILTERS = en.FilterTypes(models.Filter, models.FieldCondition, models.MatchValue, models.MatchAny,
                       models.Range, lambda ids: models.HasIdCondition(has_id=[str(i) for i in ids]))
_filter = _FILTERS.of


def _vector(v: Vector | Sparse) -> Any:
    if isinstance(v, Sparse):
        return models.SparseVector(indices=v.indices, values=v.values)
    return v.tolist()


def _record(r: Any) -> en.Record:
    order = getattr(r, "order_value", None)
    return en.Record(str(r.id), r.payload or {}, r.vector if isinstance(r.vector, dict) else {},
                     None if order is None else float(order))


def _signal_queries(query: HybridQuery) -> dict[int, Any]:
    """Column in SIGNALS -> the query scoring it; keyword columns only for a keyword query."""
    out: dict[int, Any] = {0: query.dense.tolist(), 1: query.dense.tolist()}
    if not query.keywords.is_empty():
        out[2] = out[3] = _vector(query.keywords)
    return out


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
    retries: int = 3
    backoff_s: float = 0.2
    # The circuit breaker: calls in a row finding the store down before it opens, and how long
    # it stays open before a call may try again (breaker.py).
    breaker_failures: int = 1
    breaker_cooldown_s: float = 2.0
    # Used when the collection is created (a cluster): shards, copies of each, and how many
    # copies must acknowledge a write (docs/operations.md, "Kubernetes").
    shard_number: int | None = None
    replication_factor: int | None = None
    write_consistency_factor: int | None = None

    def describe(self) -> str:
        return self.url or f"{'https' if self.https else 'http'}://{self.host}:{self.port}"


class _Serialised(MethodProxy):
    """One call at a time: qdrant-client's local mode is not thread-safe (a store and a recall at
    once failed inside it with numpy's "operands could not be broadcast together")."""

    def __init__(self, client: QdrantClient) -> None:
        super().__init__(client)
        self._lock = threading.Lock()

    def _call(self, name: str, target: Callable[..., Any], args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> Any:
        with self._lock:
            return target(*args, **kwargs)


def _client(c: Connection) -> QdrantClient:
    if c.url == ":memory:":
        return cast(QdrantClient, _Serialised(QdrantClient(location=":memory:")))
    # gRPC preferred: the batched queries and payload updates are smaller and faster there. TLS
    # as the URL's scheme says, else as configured: stated explicitly, because qdrant-client
    # turns it on by itself when an API key is given. Its gRPC port is always ours to say (with
    # a URL, qdrant-client would otherwise dial 6334 whatever port the URL names).
    https = c.url.startswith("https://") if c.url else c.https
    log.info("connecting to Qdrant at %s (gRPC port %d, TLS %s)", c.describe(), c.grpc_port,
             "on" if https else "off")
    common: dict[str, Any] = {
        "api_key": c.api_key, "prefer_grpc": True, "timeout": max(1, round(c.timeout_s)),
        "https": https, "grpc_port": c.grpc_port,
    }
    if c.url:
        return QdrantClient(url=c.url, **common)
    return QdrantClient(host=c.host, port=c.port, **common)


class QdrantEngine:
    def __init__(
        self, connection: Connection | str, dimension: int, collection: str,
        client: QdrantClient | None = None, vectors_on_disk: bool = False,
        payload_on_disk: bool = False,
    ) -> None:
        conn = Connection(url=connection) if isinstance(connection, str) else connection
        self._conn = conn
        self.dimension = dimension
        # For a collection and the payload indexes this creates; existing ones keep theirs.
        self._vectors_on_disk, self._payload_on_disk = vectors_on_disk, payload_on_disk
        self._names: dict[en.Part, str] = {"memories": collection, "ledger": f"{collection}_ledger"}
        self.name = "qdrant-local" if conn.url == ":memory:" else "qdrant-remote"
        # Local mode searches exactly and warns that search parameters do nothing.
        self._tuned = conn.url != ":memory:"
        self._exact = _EXACT if self._tuned else None
        self._raw = client or _client(conn)
        self.breaker = CircuitBreaker(conn.breaker_failures, conn.breaker_cooldown_s)
        try:
            self._client = cast(QdrantClient, Guarded(
                Retrying(self._raw, conn.retries, conn.backoff_s), self.breaker))
            self._ensure_schema()
        except (ResponseHandlingException, UnexpectedResponse, ConnectionError,
                StoreUnavailable) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise StoreUnavailable(f"cannot reach Qdrant at {conn.describe()} (gRPC port "
                                   f"{conn.grpc_port}): {first}") from exc

    def _ensure_schema(self) -> None:
        """Create the collections and payload indexes, or check the existing ones: idempotent,
        so every replica runs it on start. A mismatch is refused, never patched over."""
        memories, ledger = self._names["memories"], self._names["ledger"]
        existing: dict[str, Any] = {}  # payload indexes already there
        self._keeps_passages = True
        if self._client.collection_exists(memories):
            info = self._client.get_collection(memories)
            self._keeps_passages = check_schema(info, memories, self.dimension)
            existing = dict(info.payload_schema or {})
            if not self._keeps_passages:
                log.warning("collection %r was made before long memories' passages: a long "
                            "memory is found by its first ~1,000 characters only; export it "
                            "and import it into a new collection to index them", memories)
        else:
            self._client.create_collection(
                memories,
                vectors_config=vectors_config(self.dimension, self._vectors_on_disk),
                sparse_vectors_config=sparse_vectors_config(self._vectors_on_disk),
                on_disk_payload=self._payload_on_disk,
                **self._layout(),
            )
        if not self._client.collection_exists(ledger):
            self._client.create_collection(ledger, vectors_config={}, **self._layout())
        with warnings.catch_warnings():
            # Local mode ignores payload indexes and says so; the server needs them.
            warnings.filterwarnings("ignore", "Payload indexes have no effect")
            schemas = _SCHEMAS_ON_DISK if self._payload_on_disk else _SCHEMAS
            for field, kind in INDEXES.items():
                if field not in existing:
                    self._client.create_payload_index(memories, field, schemas[kind])
            for field, kind in LEDGER_INDEXES.items():
                self._client.create_payload_index(ledger, field, _SCHEMAS[kind])

    def _layout(self) -> dict[str, Any]:
        c = self._conn
        layout = {"shard_number": c.shard_number, "replication_factor": c.replication_factor,
                  "write_consistency_factor": c.write_consistency_factor}
        return {k: v for k, v in layout.items() if v is not None}

    def upsert(self, part: en.Part, points: Sequence[en.Point], *, insert_only: bool = False,
               only_if: en.Where = ()) -> None:
        if not points:
            return
        pts = [models.PointStruct(id=p.id, payload=p.payload, vector={
            k: _vector(v) for k, v in p.vectors.items() if k != PASSAGES or self._keeps_passages})
            for p in points]
        self._client.upsert(
            self._names[part], points=pts, wait=True, update_filter=_filter(only_if),
            update_mode=models.UpdateMode.INSERT_ONLY if insert_only else None,
        )

    def retrieve(self, part: en.Part, ids: en.Names, payload: en.Payload = True,
                 vectors: en.Names = ()) -> list[en.Record]:
        if not ids:
            return []
        records = self._client.retrieve(
            self._names[part], ids=list(ids),
            with_payload=payload if isinstance(payload, bool) else list(payload),
            with_vectors=list(vectors) or False,
        )
        return [_record(r) for r in records]

    def set_payload(self, part: en.Part, fields: en.Fields, *, ids: en.Names = (),
                    where: en.Where = ()) -> None:
        if ids or where:
            self._client.set_payload(self._names[part], payload=dict(fields),
                                     points=list(ids) if ids else _filter(where), wait=True)

    def set_payloads(self, part: en.Part, updates: Sequence[tuple[str, en.Fields]],
                     where: en.Where) -> None:
        if not updates:
            return
        ops = [
            models.SetPayloadOperation(set_payload=models.SetPayload(
                payload=dict(f), filter=_filter(where, [pid])))
            for pid, f in updates
        ]
        self._client.batch_update_points(self._names[part], update_operations=ops, wait=True)

    def delete(self, part: en.Part, where: en.Where) -> None:
        self._client.delete(self._names[part],
                            points_selector=models.FilterSelector(filter=_filter(where)))

    def count(self, part: en.Part, where: en.Where) -> int:
        return int(self._client.count(self._names[part], count_filter=_filter(where),
                                      exact=True).count)

    def scroll(self, part: en.Part, where: en.Where, limit: int, offset: str | None = None,
               payload: en.Payload = True, vectors: en.Names = (), order: en.Order | None = None) -> en.Page:
        order_by = None if order is None else models.OrderBy(
            key=order.key,
            direction=models.Direction.DESC if order.descending else models.Direction.ASC)
        records, nxt = self._client.scroll(
            self._names[part], scroll_filter=_filter(where), limit=limit, offset=offset,
            with_payload=payload if isinstance(payload, bool) else list(payload),
            with_vectors=list(vectors) or False, order_by=order_by,
        )
        return [_record(r) for r in records], None if nxt is None else str(nxt)

    def facet(self, part: en.Part, key: str, where: en.Where, limit: int) -> list[tuple[Any, int]]:
        resp = self._client.facet(self._names[part], key=key, facet_filter=_filter(where),
                                  limit=limit, exact=True)
        return [(hit.value, int(hit.count)) for hit in resp.hits]

    @property
    def passages(self) -> bool:
        return self._keeps_passages

    def fused_search(self, query: HybridQuery, filters: Sequence[en.Where],
                     limit: int) -> list[list[en.Hit]]:
        # Candidates come from the content vector and both keyword vectors (edge_engine.py).
        dense_params = models.SearchParams(
            hnsw_ef=query.ef_for(limit),
            quantization=models.QuantizationSearchParams(
                rescore=True, oversampling=QUANTIZED_OVERSAMPLING),
        ) if self._tuned else None
        signals = _signal_queries(query)
        if query.keywords.is_empty():  # one input: no fusion, and exact cosines come back
            requests = [models.QueryRequest(query=signals[0], using=SIGNALS[0], params=dense_params,
                                            filter=_filter(f), limit=limit, with_payload=False)
                        for f in filters]
        else:
            prefetches = [
                models.Prefetch(query=q, using=SIGNALS[c], limit=limit,
                                params=dense_params if c == 0 else None)
                for c, q in signals.items() if c != 1
            ]
            requests = [models.QueryRequest(prefetch=prefetches,
                                            query=models.FusionQuery(fusion=models.Fusion.RRF),
                                            filter=_filter(f), limit=limit, with_payload=False)
                        for f in filters]
        # Another replica may have written long memories: the passages are always searched.
        if self._keeps_passages:
            requests += [models.QueryRequest(
                query=[query.dense.tolist()], using=PASSAGES, filter=_filter(f),
                limit=min(limit, en.PASSAGE_CANDIDATES), with_payload=False) for f in filters]
        responses = self._client.query_batch_points(self._names["memories"], requests=requests)
        hits: list[list[en.Hit]] = [[(str(p.id), p.score) for p in r.points] for r in responses]
        if not self._keeps_passages:
            return hits
        return en.with_passage_hits(hits[:len(filters)], hits[len(filters):],
                                    query.keywords.is_empty(), limit)

    def nearest(self, vectors: Sequence[Vector], where: en.Where, limit: int) -> list[list[en.Hit]]:
        if not len(vectors):
            return []
        requests = [models.QueryRequest(query=np.asarray(v).tolist(), using=SIGNALS[0],
                                        filter=_filter(where), limit=limit, with_payload=False)
                    for v in vectors]
        responses = self._client.query_batch_points(self._names["memories"], requests=requests)
        return [[(str(p.id), p.score) for p in r.points] for r in responses]

    def signal_scores(self, query: HybridQuery, where: en.Where, keys: Sequence[Hashable],
                      columns: Sequence[int] | None = None,
                      matching: Sequence[Condition] = ()) -> en.Scored:
        scores = np.full((len(keys), len(SIGNALS)), np.nan)
        if not keys:
            return en.Scored(scores, [set() for _ in matching])
        f = _filter(where, keys)
        every = _signal_queries(query)
        queries = {c: q for c, q in every.items() if columns is None or c in columns}
        # A condition's matches: the content query again, filtered by it, ids only (every
        # memory has a content vector; not every one has the other signals).
        col0, q0 = 0, every[0]
        fold = self._keeps_passages and 0 in queries
        responses = self._client.query_batch_points(self._names["memories"], requests=[
            *(models.QueryRequest(query=q, using=SIGNALS[c], filter=f, limit=len(keys),
                                  with_payload=False, params=self._exact)
              for c, q in queries.items()),
            *(models.QueryRequest(query=q0, using=SIGNALS[col0], limit=len(keys),
                                  with_payload=False, filter=_filter([*where, cond], keys))
              for cond in matching),
            *([models.QueryRequest(query=[query.dense.tolist()], using=PASSAGES, filter=f,
                                   limit=len(keys), with_payload=False)] if fold else []),
        ])
        row: dict[Hashable, int] = {str(k): i for i, k in enumerate(keys)}
        for col, r in zip(queries, responses[:len(queries)], strict=True):
            for p in r.points:
                scores[row[str(p.id)], col] = p.score
        if fold:
            en.fold_passages(scores, row, [(str(p.id), p.score) for p in responses[-1].points])
        return en.Scored(scores, [{str(p.id) for p in r.points}
                                  for r in responses[len(queries):len(queries) + len(matching)]])

    def keys(self, ids: en.Names) -> list[Hashable]:
        return list(ids)

    def optimize(self, min_new: int = 1000) -> bool:
        """A Qdrant server builds its indexes itself (its optimizers); nothing to do."""
        return False

    def available(self) -> bool:
        """One call without retries, through the breaker: a success closes it, so the service
        recovers by itself when Qdrant is back, with or without traffic."""
        try:
            self.breaker.call(self._probe)
        except StoreUnavailable:
            return False
        return True

    def _probe(self) -> None:
        try:
            self._raw.collection_exists(self._names["memories"])
        except Exception as exc:
            if store_fault(exc):
                raise unavailable(exc, 1) from exc
            raise

    def flush(self) -> None:
        """Writes are sent with wait=True; nothing is buffered here."""

    def close(self) -> None:
        self._client.close()
