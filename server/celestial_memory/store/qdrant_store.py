"""The qdrant-client backend: a Qdrant server, cluster or Qdrant Cloud by URL, or ``:memory:``
(qdrant-client's local mode, which runs the same calls without a server; CI uses it).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

import numpy as np
from celestial_memory.domain.models import Hit, Memory, MemoryFilter, Vector
from celestial_memory.domain.zones import Zone
from celestial_memory.errors import StoreUnavailable
from celestial_memory.store.payload import (
    DENSE,
    INDEXES,
    AnyOf,
    Between,
    Condition,
    Eq,
    Ids,
    conditions,
    from_payload,
    to_payload,
)
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

_SCHEMAS: dict[str, Any] = {
    "tenant": models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True),
    "integer": models.IntegerIndexParams(
        type=models.IntegerIndexType.INTEGER, lookup=True, range=True
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
    return models.HasIdCondition(has_id=list(c.ids))


def _filter(tenant: str, flt: MemoryFilter | None = None, ids: Sequence[str] = ()) -> Any:
    conds = conditions(tenant, flt)
    if ids:
        conds.append(Ids(tuple(ids)))
    return models.Filter(must=[_condition(c) for c in conds])


class QdrantStore:
    def __init__(
        self, url: str, dimension: int, collection: str, api_key: str | None = None
    ) -> None:
        self.dimension = dimension
        self.collection = collection
        self.backend_name = "qdrant-local" if url == ":memory:" else "qdrant-remote"
        try:
            if url == ":memory:":
                self._client = QdrantClient(location=":memory:")
            else:
                self._client = QdrantClient(url=url, api_key=api_key, prefer_grpc=True)
            if not self._client.collection_exists(collection):
                self._client.create_collection(
                    collection,
                    vectors_config={
                        DENSE: models.VectorParams(size=dimension, distance=models.Distance.COSINE)
                    },
                )
            with warnings.catch_warnings():
                # Local mode ignores payload indexes and says so; the server needs them.
                warnings.filterwarnings("ignore", "Payload indexes have no effect")
                for field, kind in INDEXES.items():
                    self._client.create_payload_index(collection, field, _SCHEMAS[kind])
        except (ResponseHandlingException, UnexpectedResponse, ConnectionError) as exc:
            raise StoreUnavailable(f"cannot reach Qdrant at {url}: {exc}") from exc

    def upsert(self, memories: Sequence[Memory]) -> None:
        points = []
        for m in memories:
            if m.vector is None:
                raise ValueError(f"memory {m.id} has no vector")
            points.append(
                models.PointStruct(id=m.id, vector={DENSE: m.vector.tolist()}, payload=to_payload(m))
            )
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
        self,
        tenant: str,
        vector: Vector,
        zones: Sequence[Zone],
        flt: MemoryFilter,
        limit: int,
        min_similarity: float,
    ) -> list[list[Hit]]:
        q = vector.tolist()
        requests = [
            models.QueryRequest(
                query=q, using=DENSE, filter=_filter(tenant, replace(flt, zones=[zone])),
                limit=limit, with_payload=True, score_threshold=min_similarity,
            )
            for zone in zones
        ]
        responses = self._client.query_batch_points(self.collection, requests=requests)
        return [
            [Hit(from_payload(p.id, p.payload or {}), float(p.score)) for p in r.points]
            for r in responses
        ]

    def similarities(self, tenant: str, vector: Vector, ids: Sequence[str]) -> dict[str, float]:
        if not ids:
            return {}
        r = self._client.query_points(
            self.collection, query=vector.tolist(), using=DENSE,
            query_filter=_filter(tenant, ids=ids), limit=len(ids), with_payload=False,
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

    def flush(self) -> None:
        """Writes are sent with wait=True; nothing is buffered here."""

    def close(self) -> None:
        self._client.close()
