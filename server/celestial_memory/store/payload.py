"""The Qdrant data model shared by every engine: vectors, payload layout, indexes, conditions.

Flags are stored as integers: Qdrant Edge 0.9.0's ``MatchValue(True)`` matches nothing on
booleans. Times are POSIX seconds (float) so ranges and the memory function use them directly.
Filters are built here as backend-neutral conditions that each engine translates. Payload fields
are named only in the store package (docs/design.md, "Data model").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from celestial_memory.domain.memory_types import EPISODE, MEMORY_TYPES
from celestial_memory.domain.models import (
    Edge,
    IndexVectors,
    Memory,
    MemoryFilter,
    Provenance,
    Sparse,
    Vector,
)
from celestial_memory.domain.selection import Members, Selection
from celestial_memory.domain.trajectory import ALREADY
from celestial_memory.domain.zones import Zone

# The four named vectors of a memory point; recall scores a memory by all four (recall/retrieval.py).
DENSE = "dense"
CONTEXT_DENSE = "dense_context"
KEYWORDS = "keywords"
CONTEXT_KEYWORDS = "keywords_context"
SIGNALS = (DENSE, CONTEXT_DENSE, KEYWORDS, CONTEXT_KEYWORDS)
# A long memory's passages (recall/passages.py): a multivector compared by MaxSim, so a query's
# similarity to it is its best passage's cosine. Only long memories hold one, so it has no HNSW
# graph: searched exhaustively over the points that hold it. Folded into the content signal
# (DENSE's column) by the engines, it is not a fifth signal.
PASSAGES = "passages"
PASSAGES_DATATYPE = "float16"
# The contextual vector is only rescored over candidates, where float16 (about 1e-4 from the
# float32 cosine) ranks as float32 does and halves its storage: 15 MiB per 10,000 memories.
CONTEXT_DATATYPE = "float16"
# The content vector's HNSW search runs on int8 copies, then rescores this many times its limit
# with the float vectors (docs/design.md, "Recall" has the measurements).
QUANTIZED_OVERSAMPLING = 2.0
# The archive: forgotten memories stay points of the same collection with this zone value,
# outside the five, so every zone-filtered search (all of recall) skips them at no cost, and
# reads that name no zone are restricted to LIVE_ZONES (docs/design.md, "Forgetting").
ARCHIVE_ZONE = 5
LIVE_ZONES = tuple(int(z) for z in Zone)
# When the resting score drops below each zone threshold, core..belt (domain/trajectory.py).
DROP_FIELDS = ("drop_core", "drop_inner", "drop_outer", "drop_belt")


def search_vectors(m: Memory) -> dict[str, Vector | Sparse]:
    """A memory's named vectors. The contextual dense vector is left out where it equals the
    content vector (no context, or a caller's own vectors): a copy would cost 1.5 KB a memory
    and buy nothing, since rescoring reads the content cosine for a point that has none
    (repository.py, ``candidates``)."""
    if m.vector is None or m.index is None:
        raise ValueError(f"memory {m.id} has no search vectors")
    out: dict[str, Vector | Sparse] = {DENSE: m.vector}
    if not np.array_equal(m.index.context_dense, m.vector):
        out[CONTEXT_DENSE] = m.index.context_dense
    out[KEYWORDS] = m.index.keywords
    out[CONTEXT_KEYWORDS] = m.index.context_keywords
    if m.index.passages is not None:
        out[PASSAGES] = m.index.passages
    return out

# Payload indexes: field -> kind. The tenant index is an is_tenant keyword index. Only what is
# filtered or ordered on: ``score`` is neither, and every reinforcement rewrites it.
INDEXES: dict[str, str] = {
    "tenant": "tenant",
    "zone": "integer",
    "created_at": "float",
    "last_recalled_at": "float",
    "importance": "float",
    "pinned": "integer",
    "tags": "keyword",
    "session_id": "keyword",
    "agent_id": "keyword",
    "content_hash": "keyword",
    "drop_core": "float",
    "drop_inner": "float",
    "drop_outer": "float",
    "drop_belt": "float",
    "archived_at": "float",
    "repeat_ids": "keyword",
    # Connected memory (graph/): the memories at the other end of its relations, either way
    # (erasure finds what points at a deleted memory), and what it mentions.
    "edge_ids": "keyword",
    "entities": "keyword",
    # The queue of memories waiting for a model (understanding/extraction_queue.py).
    "understand_due": "float",
    # Types and protection (understanding/): filtered on, and kept out of forgetting.
    "memory_type": "keyword",
    "immutable": "integer",
}
LEDGER_INDEXES: dict[str, str] = {
    "tenant": "tenant",
    "kind": "keyword",
    "memory_id": "keyword",
    "at": "float",
    "holder": "keyword",
    "expires_at": "float",
}


def to_payload(m: Memory) -> dict[str, Any]:
    return {
        "tenant": m.tenant,
        "content": m.content,
        "context": m.context,
        "zone": ARCHIVE_ZONE if m.archived_at is not None else int(m.zone),
        "score": float(m.score),
        "importance": float(m.importance),
        "recall_count": int(m.recall_count),
        "created_at": float(m.created_at),
        "last_recalled_at": float(m.last_recalled_at),
        "context_score": float(m.context_score),
        "tags": list(m.tags),
        "session_id": m.session_id,
        "agent_id": m.agent_id,
        "metadata": dict(m.metadata),
        "pinned": int(m.pinned),
        "content_hash": m.content_hash,
        # To 0.1 ms: the embedded engine may give a float back a bit or two off, and ledger
        # event ids are made of it (selection.Members.version).
        "written_at": round(float(m.written_at), 4),
        **({} if m.drop_times is None else dict(zip(DROP_FIELDS, m.drop_times, strict=True))),
        **({} if m.archived_at is None else {"archived_at": float(m.archived_at)}),
        **({} if not m.merged else {
            "merged": [p.to_dict() for p in m.merged],
            # Indexed: a retried Store finds the memory its request_id was merged into.
            "repeat_ids": [p.id for p in m.merged if p.id],
        }),
        **edge_fields(m.edges),
        **({} if not m.entities else {"entities": list(m.entities)}),
        **({} if not m.triples else {"triples": [list(t) for t in m.triples]}),
        **({} if not m.summary else {"summary": m.summary}),
        **({} if m.understand_due is None else {"understand_due": float(m.understand_due)}),
        **({} if not m.understand_tries else {"understand_tries": int(m.understand_tries)}),
        **({} if not m.understand_error else {"understand_error": m.understand_error}),
        "memory_type": m.memory_type,
        "immutable": int(m.immutable),
    }


def edge_fields(edges: Sequence[Edge]) -> dict[str, Any]:
    """A memory's relations as payload: each end's record, and the other ends, indexed."""
    return {"edges": [e.to_dict() for e in edges],
            "edge_ids": sorted({e.other for e in edges})} if edges else {}


def from_payload(point_id: object, p: dict[str, Any], vector: Any = None) -> Memory:
    zone = int(p["zone"])
    archived = zone == ARCHIVE_ZONE
    return Memory(
        id=str(point_id),
        tenant=p["tenant"],
        content=p["content"],
        context=p.get("context", ""),
        # Only the cloud's memories are forgotten: an archived one left from there.
        zone=Zone.CLOUD if archived else Zone(zone),
        score=float(p["score"]),
        importance=float(p["importance"]),
        recall_count=int(p["recall_count"]),
        created_at=float(p["created_at"]),
        last_recalled_at=float(p["last_recalled_at"]),
        context_score=float(p.get("context_score", 0.0)),
        tags=list(p.get("tags") or []),
        session_id=p.get("session_id", ""),
        agent_id=p.get("agent_id", ""),
        metadata=dict(p.get("metadata") or {}),
        pinned=bool(p.get("pinned", 0)),
        content_hash=p.get("content_hash", ""),
        vector=vector,
        written_at=float(p.get("written_at", 0.0)),
        drop_times=(
            (p["drop_core"], p["drop_inner"], p["drop_outer"], p["drop_belt"])
            if "drop_core" in p else None
        ),
        archived_at=float(p["archived_at"]) if archived and "archived_at" in p else None,
        merged=[Provenance.from_dict(d) for d in p.get("merged") or []],
        edges=[Edge.from_dict(d) for d in p.get("edges") or []],
        entities=list(p.get("entities") or []),
        triples=[(str(t[0]), str(t[1]), str(t[2])) for t in p.get("triples") or []
                 if isinstance(t, list) and len(t) == 3],
        understand_due=(float(p["understand_due"]) if p.get("understand_due") is not None
                        else None),
        understand_tries=int(p.get("understand_tries", 0)),
        understand_error=str(p.get("understand_error", "")),
        # Written before types and protection existed: an episode, not protected.
        memory_type=p.get("memory_type") or EPISODE,
        immutable=bool(p.get("immutable", 0)),
        summary=str(p.get("summary", "")),
    )


def payload_fields(m: Memory, attributes: Sequence[str]) -> dict[str, Any]:
    """The payload fields that hold the named attributes of ``m`` (``drop_times`` is four, and
    none while unset)."""
    p = to_payload(m)
    out: dict[str, Any] = {}
    for a in attributes:
        if a == "drop_times":
            out.update({k: p[k] for k in DROP_FIELDS if k in p})
        elif a == "merged":  # written even when empty: a repeat may have been erased
            out["merged"] = p.get("merged", [])
            out["repeat_ids"] = p.get("repeat_ids", [])
        elif a == "edges":  # written even when empty: the last relation may have gone
            out["edges"] = p.get("edges", [])
            out["edge_ids"] = p.get("edge_ids", [])
        elif a in p:
            out[a] = p[a]
        else:  # a name that is no payload field would silently never be saved
            raise ValueError(f"{a!r} is not a stored attribute of a memory")
    return out


# What the memory function needs of a memory, for vectorised scoring (domain/selection.Members).
MEMBER_FIELDS = ("zone", "pinned", "recall_count", "last_recalled_at", "importance",
                 "context_score", "content_hash", "written_at")


def members(rows: Sequence[tuple[str, dict[str, Any]]]) -> Members:
    def col(name: str, dtype: type, default: object = 0) -> Any:
        return np.fromiter((p.get(name, default) for _, p in rows), dtype, len(rows))

    return Members(
        ids=[pid for pid, _ in rows], zone=col("zone", np.int64),
        pinned=col("pinned", np.int64), recall_count=col("recall_count", np.float64),
        last=col("last_recalled_at", np.float64), importance=col("importance", np.float64),
        context=col("context_score", np.float64),
        content_hash=[str(p.get("content_hash", "")) for _, p in rows],
        written_at=col("written_at", np.float64),
    )


def exported_memory(point_id: object, payload: dict[str, Any], vectors: dict[str, Any]) -> Memory:
    """A memory read for export: payload, content vector and contextual vector."""
    m = from_payload(point_id, payload, np.asarray(vectors[DENSE], dtype=np.float32))
    ctx = np.asarray(vectors.get(CONTEXT_DENSE, vectors[DENSE]), dtype=np.float32)
    m.index = IndexVectors(ctx, Sparse([], []), Sparse([], []))  # keywords come from the text
    return m


@dataclass(frozen=True, slots=True)
class Eq:
    key: str
    value: str | int


@dataclass(frozen=True, slots=True)
class AnyOf:
    key: str
    values: tuple[str, ...] | tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Between:
    key: str
    gte: float | None = None
    lt: float | None = None


@dataclass(frozen=True, slots=True)
class Ids:
    ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Either:
    """At least one of the conditions holds."""

    options: tuple[Eq | AnyOf | Between | Ids, ...]


@dataclass(frozen=True, slots=True)
class Neither:
    """None of the conditions holds (a point without the field holds none of them)."""

    options: tuple[Eq | AnyOf, ...]


Condition = Eq | AnyOf | Between | Ids | Either | Neither


def conditions(
    tenant: str,
    flt: MemoryFilter | None = None,
    ids: Sequence[str] = (),
    extra: Sequence[Condition] = (),
    archive: bool | None = None,
) -> list[Condition]:
    """The conjunction a request means: the tenant always, then ids, extra conditions and every
    set filter field. ``archive``: False, live memories only; True, the archive only; None,
    no restriction (a delete, an export, the ledger)."""
    out: list[Condition] = [Eq("tenant", tenant), *extra]
    if ids:
        out.append(Ids(tuple(ids)))
    if archive:
        out.append(Eq("zone", ARCHIVE_ZONE))
    elif archive is not None and not (flt is not None and flt.zones):
        out.append(AnyOf("zone", LIVE_ZONES))
    if flt is None:
        return out
    if flt.zones and not archive:
        out.append(AnyOf("zone", tuple(int(z) for z in flt.zones)))
    if flt.tags_any:
        out.append(AnyOf("tags", tuple(flt.tags_any)))
    out.extend(Eq("tags", t) for t in flt.tags_all)
    if flt.session_id:
        out.append(Eq("session_id", flt.session_id))
    if flt.agent_id:
        out.append(Eq("agent_id", flt.agent_id))
    if flt.created_after is not None or flt.created_before is not None:
        out.append(Between("created_at", flt.created_after, flt.created_before))
    if flt.recalled_after is not None or flt.recalled_before is not None:
        out.append(Between("last_recalled_at", flt.recalled_after, flt.recalled_before))
    if flt.min_importance is not None:
        out.append(Between("importance", gte=flt.min_importance))
    out.extend(Eq(f"metadata.{k}", v) for k, v in sorted(flt.metadata.items()))
    if flt.entities_any:
        out.append(AnyOf("entities", tuple(flt.entities_any)))
    if flt.memory_types:
        out.append(type_condition(flt.memory_types))
    return out


def type_condition(types: Sequence[str]) -> Condition:
    """Memories of any of ``types``. A memory stored before types existed has no type field
    and is an episode: a filter naming episodes is "none of the types it does not name"."""
    if EPISODE not in types:
        return AnyOf("memory_type", tuple(types))
    return Neither((AnyOf("memory_type", tuple(t for t in MEMORY_TYPES if t not in types)),))


def selection_conditions(tenant: str, sel: Selection) -> list[Condition]:
    """A Selection (domain/selection.py) as conditions on the indexed fields."""
    out: list[Condition] = [Eq("tenant", tenant)]
    if sel.archived:
        out.append(Eq("zone", ARCHIVE_ZONE))
        if sel.archived_before is not None:
            out.append(Between("archived_at", lt=sel.archived_before))
    elif len(sel.zones) == 1:
        out.append(Eq("zone", int(sel.zones[0])))
    elif sel.zones:
        out.append(AnyOf("zone", tuple(int(z) for z in sel.zones)))
    else:
        out.append(AnyOf("zone", LIVE_ZONES))
    if sel.unpinned:
        out.append(Eq("pinned", 0))
    if (f := sel.falling) is not None:
        drop = DROP_FIELDS[f.src]
        if f.since is None:
            out.append(Between(drop, lt=f.now))
        else:  # passed since the last rebalance, or already below when last written
            out.append(Either((Between(drop, gte=f.since, lt=f.now), Between(drop, lt=ALREADY / 2))))
        # Drop times grow zone by zone: it falls to dst when drop[dst-1] has passed and
        # drop[dst] has not.
        if f.dst > f.src + 1:
            out.append(Between(DROP_FIELDS[f.dst - 1], lt=f.now))
        if f.dst < Zone.CLOUD:
            out.append(Between(DROP_FIELDS[f.dst], gte=f.now))
    if sel.reaching_cloud_by is not None:
        out.append(Either((Eq("zone", int(Zone.CLOUD)),
                           Between(DROP_FIELDS[-1], lt=sel.reaching_cloud_by))))
    if sel.not_recalled_since is not None:
        out.append(Between("last_recalled_at", lt=sel.not_recalled_since))
    if sel.unprotected:  # a memory written before protection existed has no flag
        out.append(Neither((Eq("immutable", 1),)))
    return out


def ledger_conditions(kind: str, since: float | None, memory_id: str = "") -> list[Condition]:
    """A ledger read: records of one kind ("event" or "admin", not leases or markers), from a
    time, of one memory."""
    conds: list[Condition] = [Eq("kind", kind)]
    if since is not None:
        conds.append(Between("at", gte=since))
    if memory_id:
        conds.append(Eq("memory_id", memory_id))
    return conds
