"""The embedded backend: Qdrant Edge in-process, one shard on disk under the data directory.

Only one process may open a shard directory (Qdrant Edge 0.9.0); the shard is flushed on close.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import qdrant_edge as qe
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

_INDEX_PARAMS: dict[str, Any] = {
    "tenant": qe.KeywordIndexParams(is_tenant=True),
    "integer": qe.IntegerIndexParams(lookup=True, range=True),
    "float": qe.FloatIndexParams(),
    "keyword": qe.KeywordIndexParams(),
}


def _condition(c: Condition) -> Any:
    if isinstance(c, Eq):
        return qe.FieldCondition(c.key, match=qe.MatchValue(c.value))
    if isinstance(c, AnyOf):
        return qe.FieldCondition(c.key, match=qe.MatchAny(cast(Any, list(c.values))))
    if isinstance(c, Between):
        return qe.FieldCondition(c.key, range=qe.RangeFloat(gte=c.gte, lt=c.lt))
    return qe.HasIdCondition(set(c.ids))


def _filter(tenant: str, flt: MemoryFilter | None = None, ids: Sequence[str] = ()) -> Any:
    conds = conditions(tenant, flt)
    if ids:
        conds.append(Ids(tuple(ids)))
    return qe.Filter(must=[_condition(c) for c in conds])


class EdgeStore:
    backend_name = "edge"

    def __init__(self, path: Path, dimension: int) -> None:
        self.dimension = dimension
        self._path = path
        config = qe.EdgeConfig(
            vectors={DENSE: qe.EdgeVectorParams(size=dimension, distance=qe.Distance.Cosine)}
        )
        try:
            if (path / "edge_config.json").exists() or any(path.glob("segments*")):
                self._shard = qe.EdgeShard.load(str(path), config)
            else:
                path.mkdir(parents=True, exist_ok=True)
                self._shard = qe.EdgeShard.create(str(path), config)
        except Exception as exc:  # the engine reports lock and format problems as plain errors
            raise StoreUnavailable(f"cannot open the embedded store at {path}: {exc}") from exc
        existing = set(self._shard.info().payload_schema)
        for field, kind in INDEXES.items():
            if field not in existing:
                self._update(qe.UpdateOperation.create_field_index(field, _INDEX_PARAMS[kind]))
        # Edge calls are thread-safe in the engine; the lock keeps multi-step writes whole.
        self._write_lock = threading.Lock()

    def _update(self, op: Any) -> None:
        try:
            self._shard.update(op)
        except Exception as exc:
            raise StoreUnavailable(f"embedded store refused a write: {exc}") from exc

    def upsert(self, memories: Sequence[Memory]) -> None:
        points = []
        for m in memories:
            if m.vector is None:
                raise ValueError(f"memory {m.id} has no vector")
            points.append(qe.Point(m.id, {DENSE: m.vector.tolist()}, to_payload(m)))
        if points:
            with self._write_lock:
                self._update(qe.UpdateOperation.upsert_points(points))

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

    def set_fields(self, tenant: str, updates: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        with self._write_lock:
            for point_id, fields in updates:
                # Scoped by tenant in the filter, so a foreign id can never be touched.
                self._update(
                    qe.UpdateOperation.set_payload_by_filter(
                        _filter(tenant, ids=[point_id]), dict(fields)
                    )
                )

    def delete(self, tenant: str, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        flt = _filter(tenant, ids=ids)
        with self._write_lock:
            n = self._shard.count(qe.CountRequest(filter=flt, exact=True))
            self._update(qe.UpdateOperation.delete_points_by_filter(flt))
        return int(n)

    def delete_by_filter(self, tenant: str, flt: MemoryFilter) -> int:
        f = _filter(tenant, flt)
        with self._write_lock:
            n = self._shard.count(qe.CountRequest(filter=f, exact=True))
            self._update(qe.UpdateOperation.delete_points_by_filter(f))
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
        q = qe.Query.Nearest(vector.tolist(), using=DENSE)
        requests = []
        for zone in zones:
            zf = replace(flt, zones=[zone])
            requests.append(
                qe.QueryRequest(
                    limit=limit, query=q, filter=_filter(tenant, zf),
                    with_payload=True, score_threshold=min_similarity,
                )
            )
        batches = self._shard.query_batch(qe.QueryBatchRequest(requests))
        return [
            [Hit(from_payload(p.id, p.payload or {}), float(p.score)) for p in b]
            for b in batches
        ]

    def similarities(self, tenant: str, vector: Vector, ids: Sequence[str]) -> dict[str, float]:
        if not ids:
            return {}
        points = self._shard.query(
            qe.QueryRequest(
                limit=len(ids), query=qe.Query.Nearest(vector.tolist(), using=DENSE),
                filter=_filter(tenant, ids=ids), with_payload=False,
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
        offset: Any = None
        f = _filter(tenant, flt)
        while True:
            records, offset = self._shard.scroll(
                qe.ScrollRequest(offset=offset, limit=page_size, filter=f, with_payload=True)
            )
            if records:
                yield [from_payload(r.id, r.payload or {}) for r in records]
            if offset is None:
                return

    def flush(self) -> None:
        self._shard.flush()

    def close(self) -> None:
        self._shard.flush()
        self._shard.close()

