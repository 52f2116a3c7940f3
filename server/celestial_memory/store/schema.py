"""The remote collection's shape: made with it, or checked on start (qdrant_engine.py)."""

from __future__ import annotations

from typing import Any

from celestial_memory.errors import SchemaMismatch
from celestial_memory.store.payload import (
    CONTEXT_DATATYPE,
    CONTEXT_DENSE,
    CONTEXT_KEYWORDS,
    DENSE,
    INDEXES,
    KEYWORDS,
    PASSAGES,
    PASSAGES_DATATYPE,
)
from qdrant_client import models

# Payload index kinds (payload.INDEXES) -> the schema type names Qdrant reports.
_TYPES = {"tenant": "keyword", "integer": "integer", "float": "float", "keyword": "keyword"}


def vectors_config(dimension: int, on_disk: bool) -> dict[str, models.VectorParams]:
    """The dense vectors of a new collection."""
    return {
        # int8 copies for the HNSW search, rescored (edge_engine.py _QUANTIZED).
        DENSE: models.VectorParams(
            size=dimension, distance=models.Distance.COSINE,
            quantization_config=models.ScalarQuantization(scalar=models.ScalarQuantizationConfig(
                type=models.ScalarType.INT8, always_ram=True)),
            on_disk=on_disk,
        ),
        # Only rescored over candidates, so no HNSW graph (m = 0); float16
        # (payload.CONTEXT_DATATYPE).
        CONTEXT_DENSE: models.VectorParams(
            size=dimension, distance=models.Distance.COSINE, hnsw_config=models.HnswConfigDiff(m=0),
            datatype=models.Datatype(CONTEXT_DATATYPE), on_disk=on_disk,
        ),
        # A long memory's passages, compared by MaxSim (payload.PASSAGES).
        PASSAGES: models.VectorParams(
            size=dimension, distance=models.Distance.COSINE,
            multivector_config=models.MultiVectorConfig(
                comparator=models.MultiVectorComparator.MAX_SIM),
            hnsw_config=models.HnswConfigDiff(m=0), datatype=models.Datatype(PASSAGES_DATATYPE),
            on_disk=on_disk,
        ),
    }


def sparse_vectors_config(on_disk: bool) -> dict[str, models.SparseVectorParams]:
    """The keyword vectors of a new collection: Qdrant applies their IDF."""
    return {name: models.SparseVectorParams(modifier=models.Modifier.IDF,
                                            index=models.SparseIndexParams(on_disk=on_disk))
            for name in (KEYWORDS, CONTEXT_KEYWORDS)}


def check_schema(info: Any, collection: str, dimension: int) -> bool:
    """Raise SchemaMismatch naming what differs between ``info`` (get_collection) and what this
    server writes: dense vector sizes and distance, the sparse vectors, payload index types.
    Returns whether the collection keeps long memories' passages (one made before them does
    not, and is used without them)."""
    problems = []
    vectors = info.config.params.vectors
    vectors = vectors if isinstance(vectors, dict) else {}
    for name in (DENSE, CONTEXT_DENSE):
        v = vectors.get(name)
        if v is None:
            problems.append(f"no dense vector {name!r}")
        elif v.size != dimension or str(v.distance).lower().split(".")[-1] != "cosine":
            problems.append(f"vector {name!r} is {v.size}-d {v.distance}, not {dimension}-d cosine")
    passages = vectors.get(PASSAGES)
    if passages is not None and (passages.size != dimension
                                 or getattr(passages, "multivector_config", None) is None):
        problems.append(f"vector {PASSAGES!r} is not a {dimension}-d multivector")
    sparse = info.config.params.sparse_vectors or {}
    for name in (KEYWORDS, CONTEXT_KEYWORDS):
        if name not in sparse:
            problems.append(f"no sparse vector {name!r}")
    for field, schema in (info.payload_schema or {}).items():
        kind = INDEXES.get(field)
        got = str(getattr(schema, "data_type", "")).lower().split(".")[-1]
        if kind is not None and got and got != _TYPES[kind]:
            problems.append(f"payload index {field!r} is {got}, not {_TYPES[kind]}")
    if problems:
        raise SchemaMismatch(
            f"collection {collection!r} does not match this server: " + "; ".join(problems)
            + ". Use another collection (CELESTIAL_COLLECTION) or migrate with export/import."
        )
    return passages is not None
