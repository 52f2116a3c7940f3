"""The embedded engine: Qdrant Edge in-process, shards on disk under the data directory.

Two shards: the memories (``<collection>``) and the ledger (``<collection>_ledger``, no vectors).
Only one process may open a shard directory (Qdrant Edge 0.9.0); shards are flushed on close.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import qdrant_edge as qe
from celestial_memory.domain.models import HybridQuery, Sparse, Vector
from celestial_memory.errors import StoreUnavailable
from celestial_memory.store import engine as en
from celestial_memory.store import payload as pl

_INDEX_PARAMS: dict[str, Any] = {
    "tenant": qe.KeywordIndexParams(is_tenant=True),
    # Zone and pinned are matched by value only; a range structure would double the cost of
    # every zone write (measured: 300 -> 150 ms per 10,000 moves at 200,000 memories).
    "integer": qe.IntegerIndexParams(lookup=True, range=False),
    "float": qe.FloatIndexParams(),
    "keyword": qe.KeywordIndexParams(),
}
# With the payload on disk, the float and keyword indexes are memory-mapped and read when a filter
# touches them; the tenant and integer (zone) indexes stay in RAM, since every recall filters on
# them (docs/encoder.md, "A million memories").
_INDEX_PARAMS_ON_DISK: dict[str, Any] = {
    **_INDEX_PARAMS,
    "float": qe.FloatIndexParams(memory=qe.Memory.Cold),
    "keyword": qe.KeywordIndexParams(memory=qe.Memory.Cold),
}
# The content vector's HNSW search runs on int8 copies, then rescores with the float vectors;
# rescoring over candidates reads the float vectors only: relevance needs the true cosine.
_QUANTIZED = qe.QuantizationSearchParams(rescore=True, oversampling=pl.QUANTIZED_OVERSAMPLING)
_EXACT = qe.SearchParams(quantization=qe.QuantizationSearchParams(ignore=True))


_FILTERS = en.FilterTypes(qe.Filter, qe.FieldCondition, qe.MatchValue, qe.MatchAny, qe.RangeFloat,
                       lambda ids: qe.HasIdCondition(set(ids)))
_filter = _FILTERS.of


def _vector(v: Vector | Sparse) -> Any:
    return qe.SparseVector(v.indices, v.values) if isinstance(v, Sparse) else v.tolist()


def _payload(payload: en.Payload) -> Any:
    return payload if isinstance(payload, bool) else qe.PayloadSelector.Include(list(payload))


def _record(r: Any) -> en.Record:
    order = getattr(r, "order_value", None)
    return en.Record(str(r.id), r.payload or {}, cast(dict[str, Any], r.vector or {}),
                     None if order is None else float(order))


def _signal_queries(query: HybridQuery, columns: Sequence[int] = (0, 1, 2, 3)) -> dict[int, Any]:
    """Column in pl.SIGNALS -> the query scoring it, for ``columns``; keyword columns only for a
    keyword query. Only those asked are built: each converts the vector (384 floats)."""
    dense = query.dense.tolist() if 0 in columns or 1 in columns else []
    out = {c: qe.Query.Nearest(dense, using=pl.SIGNALS[c]) for c in (0, 1) if c in columns}
    if not query.keywords.is_empty() and (2 in columns or 3 in columns):
        kw = _vector(query.keywords)
        out.update({c: qe.Query.Nearest(kw, using=pl.SIGNALS[c]) for c in (2, 3) if c in columns})
    return out


log = logging.getLogger(__name__)

_DATATYPES = {"float32": qe.VectorStorageDatatype.Float32,
              "float16": qe.VectorStorageDatatype.Float16}


def _stored_config(path: Path) -> dict[str, Any] | None:
    """An existing shard's configuration (a shard cannot be opened with another); None for a
    new shard."""
    try:
        return cast(dict[str, Any], json.loads((path / "edge_config.json").read_text()))
    except FileNotFoundError:
        return None


def _stored_datatype(stored: dict[str, Any] | None, vector: str) -> Any:
    """The storage datatype an existing shard keeps ``vector`` in; None for a new shard."""
    if stored is None:
        return None
    return _DATATYPES[stored.get("vectors", {}).get(vector, {}).get("datatype", "float32")]


def _open(path: Path, config: Any, indexes: Mapping[str, str],
          params: Mapping[str, Any] = _INDEX_PARAMS) -> Any:
    try:
        if (path / "edge_config.json").exists():
            shard = qe.EdgeShard.load(str(path), config)
        else:
            path.mkdir(parents=True, exist_ok=True)
            shard = qe.EdgeShard.create(str(path), config)
    except Exception as exc:  # the engine reports lock and format problems as plain errors
        if "WouldBlock" in str(exc):  # its write-ahead log is locked by another process
            raise StoreUnavailable(
                f"the data folder {path.parent} is in use by another Celestial server (one "
                f"process at a time may open it): stop that server, or give this one another "
                f"folder with --data-dir or CELESTIAL_DATA_DIR") from exc
        raise StoreUnavailable(f"cannot open the embedded store at {path}: {exc}") from exc
    existing = set(shard.info().payload_schema)
    for field, kind in indexes.items():
        if field not in existing:
            shard.update(qe.UpdateOperation.create_field_index(field, params[kind]))
    return shard


class EdgeEngine:
    name = "edge"

    def __init__(self, path: Path, dimension: int, vectors_on_disk: bool = False,
                 payload_on_disk: bool = False) -> None:
        self.dimension = dimension
        # Cold: memory-mapped, read from disk when touched; the int8 copies stay in RAM, and so
        # does the HNSW graph.
        originals = qe.Memory.Cold if vectors_on_disk else None
        stored = _stored_config(path)
        # A shard made before passages existed cannot take the vector (the engine refuses a
        # configuration that differs): it keeps working without them (docs/design.md).
        self._keeps_passages = stored is None or pl.PASSAGES in stored.get("vectors", {})
        passages = {pl.PASSAGES: qe.EdgeVectorParams(
            size=dimension, distance=qe.Distance.Cosine,
            multivector_config=qe.MultiVectorConfig(qe.MultiVectorComparator.MaxSim),
            hnsw_config=qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10_000),
            datatype=_DATATYPES[pl.PASSAGES_DATATYPE], memory=originals,
        )} if self._keeps_passages else {}
        if not self._keeps_passages:
            log.warning("the embedded store at %s was made before long memories' passages: a "
                        "long memory is found by its first ~1,000 characters only; export it "
                        "and import it into a new data folder to index them", path)
        config = qe.EdgeConfig(
            vectors={
                pl.DENSE: qe.EdgeVectorParams(
                    size=dimension, distance=qe.Distance.Cosine,
                    quantization_config=qe.ScalarQuantizationConfig(
                        qe.ScalarType.Int8, always_ram=True),
                    memory=originals,
                ),
                # Only rescored over candidates (HasId filter), so no HNSW graph: m = 0. Kept as
                # float16 (payload.CONTEXT_DATATYPE): a store made before keeps its float32.
                pl.CONTEXT_DENSE: qe.EdgeVectorParams(
                    size=dimension, distance=qe.Distance.Cosine,
                    hnsw_config=qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10_000),
                    datatype=_stored_datatype(stored, pl.CONTEXT_DENSE) or _DATATYPES[
                        pl.CONTEXT_DATATYPE],
                    memory=originals,
                ),
                **passages,
            },
            # The keyword vectors' inverted indexes, in RAM unless the vectors are on disk.
            sparse_vectors={
                name: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf, memory=originals)
                for name in (pl.KEYWORDS, pl.CONTEXT_KEYWORDS)
            },
            # Payload pages kept in RAM by default: a full rebalance and capacity checks read
            # many payloads.
            payload_memory=qe.Memory.Cold if payload_on_disk else qe.Memory.Cached,
        )
        ledger_config = qe.EdgeConfig(sparse_vectors={"_": qe.EdgeSparseVectorParams()})
        self._shards = {
            "memories": _open(path, config, pl.INDEXES,
                              _INDEX_PARAMS_ON_DISK if payload_on_disk else _INDEX_PARAMS),
            "ledger": _open(path.with_name(path.name + "_ledger"), ledger_config, pl.LEDGER_INDEXES),
        }
        self._memories = self._shards[en.MEMORIES]
        # Whether any point holds passages: until one does, a recall does not search them (an
        # exhaustive search over nothing still costs ~0.1 ms a zone).
        self._holds_passages = self._keeps_passages and self._holds(pl.PASSAGES)
        # Likewise a contextual vector (payload.search_vectors writes one only where a context
        # made it differ): until one is held, rescoring by it is a round trip that scores nothing.
        self._holds_context = self._holds(pl.CONTEXT_DENSE)
        # Points upserted since the last index build (optimize); a reopened store builds once.
        self._unindexed = 1_000_000

    def _holds(self, vector: str) -> bool:
        return bool(self._memories.count(qe.CountRequest(
            filter=qe.Filter(must=[qe.HasVectorCondition(vector)]), exact=True)) > 0)

    def _update(self, part: en.Part, op: Any) -> None:
        try:
            self._shards[part].update(op)
        except Exception as exc:
            raise StoreUnavailable(f"embedded store refused a write: {exc}") from exc

    def upsert(self, part: en.Part, points: Sequence[en.Point], *, insert_only: bool = False,
               only_if: en.Where = ()) -> None:
        if not points:
            return
        pts = [qe.Point(p.id, {k: _vector(v) for k, v in p.vectors.items()
                               if k != pl.PASSAGES or self._keeps_passages}, p.payload)
               for p in points]
        if part == en.MEMORIES:
            if self._keeps_passages and not self._holds_passages:
                self._holds_passages = any(pl.PASSAGES in p.vectors for p in points)
            if not self._holds_context:
                self._holds_context = any(pl.CONTEXT_DENSE in p.vectors for p in points)
        mode = qe.UpdateMode.InsertOnly if insert_only else None
        self._update(part, qe.UpdateOperation.upsert_points(
            pts, condition=_filter(only_if), update_mode=mode))
        if part == en.MEMORIES:
            self._unindexed += len(pts)

    def retrieve(self, part: en.Part, ids: en.Names, payload: en.Payload = True,
                 vectors: en.Names = ()) -> list[en.Record]:
        if not ids:
            return []
        def fetch(keys: list[str]) -> Any:
            return self._shards[part].retrieve(keys, with_payload=_payload(payload),
                                               with_vector=list(vectors) or False)

        try:
            records = fetch(list(ids))
        except ValueError:  # an id that is no UUID: it names no point (qdrant-client agrees)
            records = fetch(kept) if (kept := en.valid_ids(ids)) else []
        return [_record(r) for r in records]

    def set_payload(self, part: en.Part, fields: en.Fields, *, ids: en.Names = (),
                    where: en.Where = ()) -> None:
        if ids:
            self._update(part, qe.UpdateOperation.set_payload(list(ids), dict(fields)))
        elif where:
            self._update(part, qe.UpdateOperation.set_payload_by_filter(_filter(where), dict(fields)))

    def set_payloads(self, part: en.Part, updates: Sequence[tuple[str, en.Fields]],
                     where: en.Where) -> None:
        # The engine has no batch of operations: one read finds which ids match, then each is
        # written by id, in-process.
        if not updates:
            return
        ids = [pid for pid, _ in updates]
        records, _ = self._shards[part].scroll(qe.ScrollRequest(
            limit=len(ids), filter=_filter(where, self.keys(ids)), with_payload=False))
        matching = {str(r.id) for r in records}
        for pid, fields in updates:
            if pid in matching:
                self._update(part, qe.UpdateOperation.set_payload([pid], dict(fields)))

    def delete(self, part: en.Part, where: en.Where) -> None:
        self._update(part, qe.UpdateOperation.delete_points_by_filter(_filter(where)))

    def count(self, part: en.Part, where: en.Where) -> int:
        return int(self._shards[part].count(qe.CountRequest(filter=_filter(where), exact=True)))

    def scroll(self, part: en.Part, where: en.Where, limit: int, offset: str | None = None,
               payload: en.Payload = True, vectors: en.Names = (), order: en.Order | None = None) -> en.Page:
        order_by = None if order is None else qe.OrderBy(
            order.key, direction=qe.Direction.Desc if order.descending else qe.Direction.Asc)
        records, nxt = self._shards[part].scroll(qe.ScrollRequest(
            offset=offset, limit=limit, filter=_filter(where), with_payload=_payload(payload),
            with_vector=list(vectors) or False, order_by=order_by,
        ))
        return [_record(r) for r in records], None if nxt is None else str(nxt)

    def facet(self, part: en.Part, key: str, where: en.Where, limit: int) -> list[tuple[Any, int]]:
        resp = self._shards[part].facet(
            qe.FacetRequest(key=key, limit=limit, exact=True, filter=_filter(where)))
        return [(hit.value, int(hit.count)) for hit in resp.hits]

    @property
    def passages(self) -> bool:
        return self._keeps_passages

    def fused_search(self, query: HybridQuery, filters: Sequence[en.Where],
                     limit: int) -> list[list[en.Hit]]:
        # Candidates come from the content vector and both keyword vectors; the contextual dense
        # vector is only rescored (it has no HNSW graph). Built once: each converts the vector.
        dense = qe.SearchParams(hnsw_ef=query.ef_for(limit), quantization=_QUANTIZED)
        signals = _signal_queries(query, (0, 2, 3))
        if query.keywords.is_empty():  # one input: no fusion, and exact cosines come back
            requests = [qe.QueryRequest(limit=limit, query=signals[0], params=dense,
                                        filter=_filter(f), with_payload=False) for f in filters]
        else:
            prefetches = [
                qe.Prefetch(limit=limit, query=q, params=dense if c == 0 else None)
                for c, q in signals.items()
            ]
            fusion = cast(Any, qe.Fusion.Rrf(k=60))
            requests = [qe.QueryRequest(limit=limit, prefetches=prefetches, query=fusion,
                                        filter=_filter(f), with_payload=False) for f in filters]
        if self._holds_passages:
            passages = qe.Query.Nearest([query.dense.tolist()], using=pl.PASSAGES)
            requests += [qe.QueryRequest(limit=min(limit, en.PASSAGE_CANDIDATES),
                                         query=passages, filter=_filter(f), with_payload=False)
                         for f in filters]
        batches = self._memories.query_batch(qe.QueryBatchRequest(requests))
        hits = [[(p.id, p.score) for p in b] for b in batches]
        if not self._holds_passages:
            return hits
        return en.with_passage_hits(hits[:len(filters)], hits[len(filters):],
                                    query.keywords.is_empty(), limit)

    def nearest(self, vectors: Sequence[Vector], where: en.Where, limit: int) -> list[list[en.Hit]]:
        if not len(vectors):
            return []
        f = _filter(where)
        batches = self._memories.query_batch(qe.QueryBatchRequest([
            qe.QueryRequest(limit=limit, query=qe.Query.Nearest(np.asarray(v).tolist(),
                                                                using=pl.DENSE),
                            params=_EXACT, filter=f, with_payload=False)
            for v in vectors]))
        return [[(p.id, p.score) for p in b] for b in batches]

    def signal_scores(self, query: HybridQuery, where: en.Where, keys: Sequence[Hashable],
                      columns: Sequence[int] | None = None,
                      matching: Sequence[pl.Condition] = ()) -> en.Scored:
        scores = np.full((len(keys), len(pl.SIGNALS)), np.nan)
        asked = (0, 1, 2, 3) if columns is None else tuple(columns)
        if not self._holds_context:  # no contextual vector held: rescoring by it scores nothing
            asked = tuple(c for c in asked if c != 1)
        if not keys or not (asked or matching):
            return en.Scored(scores, [set() for _ in matching])
        # The id condition is made once and shared by every request of the batch: converting
        # the ids is the costly part of a filter (150 ids: 140 µs, against 5 µs to reuse it),
        # and the engine holds the GIL meanwhile.
        has_ids = _FILTERS.has_id(list(keys))
        common = [_FILTERS.condition(c) for c in where]
        f = qe.Filter(must=[*common, has_ids])
        every = _signal_queries(query, (*asked, 0) if matching else asked)
        queries = {c: q for c, q in every.items() if c in asked}
        # A condition's matches: the content query again (cheap over these few points),
        # filtered by it, ids only; every memory has a content vector, not every one the others.
        any_query = every.get(0)
        fold = self._holds_passages and 0 in queries
        batches = self._memories.query_batch(qe.QueryBatchRequest([
            *(qe.QueryRequest(limit=len(keys), query=q, filter=f, with_payload=False,
                              params=_EXACT) for q in queries.values()),
            *(qe.QueryRequest(limit=len(keys), query=any_query, with_payload=False,
                              filter=qe.Filter(must=[*common, _FILTERS.condition(c), has_ids]))
              for c in matching),
            *([qe.QueryRequest(limit=len(keys), filter=f, with_payload=False,
                               query=qe.Query.Nearest([query.dense.tolist()], using=pl.PASSAGES))]
              if fold else []),
        ]))
        row = {k: i for i, k in enumerate(keys)}
        for col, b in zip(queries, batches[:len(queries)], strict=True):
            for p in b:
                scores[row[p.id], col] = p.score
        if fold:
            en.fold_passages(scores, row, [(p.id, p.score) for p in batches[-1]])
        matched = batches[len(queries):len(queries) + len(matching)]
        return en.Scored(scores, [{str(p.id) for p in b} for b in matched])

    def keys(self, ids: en.Names) -> list[Hashable]:
        # The engine returns UUID objects; handing them back as they are saves a conversion
        # per candidate (HasIdCondition from 120 strings: 670 µs, from UUIDs: 430 µs).
        try:
            return [uuid.UUID(i) for i in ids]
        except ValueError:
            return [uuid.UUID(i) for i in en.valid_ids(ids)]

    def optimize(self, min_new: int = 1000) -> bool:
        """Build the vector indexes (HNSW) over what was written since the last build: minutes
        at 100,000 memories, so the server runs it in a worker thread, off the request path.
        Points written since the last build are searched exhaustively meanwhile, which costs
        little below about a thousand."""
        if self._unindexed < min_new:
            return False
        self._unindexed = 0
        self._memories.optimize()
        return True

    def available(self) -> bool:
        return True  # in-process: there when the server is

    def flush(self) -> None:
        for shard in self._shards.values():
            shard.flush()

    def close(self) -> None:
        for shard in self._shards.values():
            shard.flush()
            shard.close()
