"""The remote collection's expected shape, checked on start (qdrant_engine.py)."""

from __future__ import annotations

from typing import Any

from celestial_memory.errors import SchemaMismatch
from celestial_memory.store.payload import CONTEXT_DENSE, CONTEXT_KEYWORDS, DENSE, INDEXES, KEYWORDS

# Payload index kinds (payload.INDEXES) -> the schema type names Qdrant reports.
_TYPES = {"tenant": "keyword", "integer": "integer", "float": "float", "keyword": "keyword"}


def check_schema(info: Any, collection: str, dimension: int) -> None:
    """Raise SchemaMismatch naming what differs between ``info`` (get_collection) and what this
    server writes: dense vector sizes and distance, the sparse vectors, payload index types."""
    problems = []
    vectors = info.config.params.vectors
    vectors = vectors if isinstance(vectors, dict) else {}
    for name in (DENSE, CONTEXT_DENSE):
        v = vectors.get(name)
        if v is None:
            problems.append(f"no dense vector {name!r}")
        elif v.size != dimension or str(v.distance).lower().split(".")[-1] != "cosine":
            problems.append(f"vector {name!r} is {v.size}-d {v.distance}, not {dimension}-d cosine")
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
