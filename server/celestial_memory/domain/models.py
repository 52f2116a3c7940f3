"""Domain types passed between the service and the storage backends (no protobuf here)."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from celestial_memory.domain.scoring import ScoreBreakdown
from celestial_memory.domain.zones import Zone

Vector = npt.NDArray[np.float32]


# Repeats whose wording and provenance a memory keeps (memory/repeats.py); later ones count as mentions.
MAX_KEPT = 64


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(slots=True)
class Provenance:
    """A repeat merged into a memory (memory/service.py, "Repeats"): its own wording and where it came
    from, kept so that merging loses nothing."""

    content: str
    created_at: float
    id: str = ""  # the merged memory's id, when it had one (a consolidation)
    session_id: str = ""
    agent_id: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    context: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"content": self.content, "created_at": self.created_at, "id": self.id,
                "session_id": self.session_id, "agent_id": self.agent_id,
                "metadata": dict(self.metadata), "context": self.context}

    def size(self) -> int:
        """About what the entry takes in an answer: its texts in UTF-8, a little framing each."""
        texts = [self.content, self.context, self.id, self.session_id, self.agent_id,
                 *self.metadata, *self.metadata.values()]
        return sum(len(t.encode()) + 8 for t in texts) + 32

    @staticmethod
    def from_dict(d: dict[str, object]) -> Provenance:
        meta = d.get("metadata")
        return Provenance(
            content=str(d.get("content", "")), created_at=float(d.get("created_at", 0.0)),  # type: ignore[arg-type]
            id=str(d.get("id", "")), session_id=str(d.get("session_id", "")),
            agent_id=str(d.get("agent_id", "")),
            metadata={str(k): str(v) for k, v in meta.items()} if isinstance(meta, dict) else {},
            context=str(d.get("context", "")),
        )


@dataclass(frozen=True, slots=True)
class Edge:
    """One end of a relation, as the memory at this end keeps it (graph/relations.py): the
    memory at the other end, the relation's name and weight, who made it and when, and whether
    it points from this memory (``outgoing``) or to it."""

    other: str
    relation: str
    weight: float
    made_by: str  # caller, session, repeat or derived
    at: float
    outgoing: bool = True

    def to_dict(self) -> dict[str, object]:
        return {"id": self.other, "rel": self.relation, "w": self.weight, "by": self.made_by,
                "at": self.at, "out": int(self.outgoing)}

    @staticmethod
    def from_dict(d: dict[str, object]) -> Edge:
        w = float(d["w"])  # type: ignore[arg-type]
        # Weights are in [0, 1] (checked on every write); one stored otherwise by an older
        # server is read clamped, so no path's strength can pass 1 or be NaN.
        w = min(1.0, max(0.0, w)) if math.isfinite(w) else 0.0
        return Edge(str(d["id"]), str(d["rel"]), w,
                    str(d.get("by", "caller")), float(d.get("at", 0.0)),  # type: ignore[arg-type]
                    bool(d.get("out", 1)))


@dataclass(slots=True)
class Memory:
    """One memory: what Qdrant keeps as one point's payload (plus, optionally, its vector)."""

    id: str
    tenant: str
    content: str
    zone: Zone
    score: float
    importance: float
    recall_count: int
    created_at: float
    last_recalled_at: float
    context_score: float = 0.0
    tags: list[str] = field(default_factory=list)
    session_id: str = ""
    agent_id: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    pinned: bool = False
    content_hash: str = ""
    vector: Vector | None = None
    # Text indexed with the memory but not part of it (e.g. the previous turn); see recall/retrieval.py.
    context: str = ""
    index: IndexVectors | None = None  # the other search vectors, set only while writing
    # Time the resting score drops below each threshold (core..belt): see domain/trajectory.py.
    drop_times: tuple[float, float, float, float] | None = None
    written_at: float = 0.0  # last store, reinforcement or update: keys ledger events
    # When forgetting moved it out of the zones into the archive (zones/rebalancer.py); None: live.
    archived_at: float | None = None
    merged: list[Provenance] = field(default_factory=list)  # repeats merged into it
    edges: list[Edge] = field(default_factory=list)  # its relations, both ways
    entities: list[str] = field(default_factory=list)  # keys of what it mentions (graph/)
    # Facts a model read in it, (subject, relation, object) (understanding/extraction.py).
    triples: list[tuple[str, str, str]] = field(default_factory=list)
    # Its one-line summary, by rules at store time or by a model later
    # (understanding/resolutions.py): the shorter form Context may show.
    summary: str = ""
    # Waiting for the model since this time (the durable queue, understanding/extraction_queue.py)
    # and the tries so far; None once understood, or given up with ``understand_error`` set.
    understand_due: float | None = None
    understand_tries: int = 0
    understand_error: str = ""
    memory_type: str = "episode"  # domain/memory_types.py
    # Never updated, merged into or forgotten; deleted only by an admin (understanding/).
    immutable: bool = False

    @property
    def archived(self) -> bool:
        return self.archived_at is not None


# The attributes each kind of write changes (the repository's ``save``).
REINFORCED = ("recall_count", "last_recalled_at", "context_score", "score", "zone", "drop_times",
              "written_at")
EDITED = ("tags", "metadata", "pinned", "importance", "score", "zone", "drop_times", "written_at")
RESTORED = ("last_recalled_at", "score", "zone", "drop_times", "written_at")
MERGED = (*REINFORCED, "merged", "importance", "pinned", "tags")


@dataclass(frozen=True, slots=True)
class Sparse:
    """A sparse keyword vector: term ids and their BM25 weights (see recall/keywords.py)."""

    indices: list[int]
    values: list[float]

    def is_empty(self) -> bool:
        return not self.indices


@dataclass(slots=True)
class IndexVectors:
    """What a memory is found by besides its content vector."""

    context_dense: Vector  # context + content embedded; the content vector when no context
    keywords: Sparse  # content keywords
    context_keywords: Sparse  # context + content keywords
    # A long memory's passages embedded, one row each (recall/passages.py); None for a memory
    # the content vector reads whole.
    passages: Vector | None = None


@dataclass(frozen=True, slots=True)
class HybridQuery:
    dense: Vector
    keywords: Sparse
    # HNSW beam for the candidate search; None = the engine's default (ef_construct).
    hnsw_ef: int | None = None

    def ef_for(self, limit: int) -> int | None:
        return None if self.hnsw_ef is None else max(self.hnsw_ef, limit)


@dataclass(slots=True)
class MemoryFilter:
    """Restrictions on a search, a count or a delete; empty fields do not restrict."""

    zones: list[Zone] = field(default_factory=list)
    tags_any: list[str] = field(default_factory=list)
    tags_all: list[str] = field(default_factory=list)
    session_id: str = ""
    agent_id: str = ""
    created_after: float | None = None
    created_before: float | None = None
    recalled_after: float | None = None
    recalled_before: float | None = None
    min_importance: float | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    entities_any: list[str] = field(default_factory=list)  # ids "<kind>:<key>" (graph/)
    memory_types: list[str] = field(default_factory=list)  # any of these (understanding/)

    def is_empty(self) -> bool:
        return not (
            self.zones or self.tags_any or self.tags_all or self.session_id or self.agent_id
            or self.metadata or self.entities_any or self.memory_types
            or self.min_importance is not None
            or any(t is not None for t in (
                self.created_after, self.created_before, self.recalled_after, self.recalled_before
            ))
        )


@dataclass(slots=True)
class RecallResult:
    memory: Memory
    found_in: Zone
    relevance: float
    breakdown: ScoreBreakdown
    archived: bool = False  # found in the archive (a deep recall), not reinforced
    via: Via | None = None  # reached through a relation of another result (graph expansion)
    at: float | None = None  # the time its breakdown is of (its memory's is given at the same)


@dataclass(frozen=True, slots=True)
class Via:
    """How graph expansion reached a result: from which result, along which relation."""

    source: str
    relation: str
    weight: float
    hops: int = 1


@dataclass(slots=True)
class RebalanceReport:
    scanned: int
    moved: dict[tuple[Zone, Zone], int]
    evicted: int
    forgotten: int  # moved into the archive
    dry_run: bool
    duration_ms: float
    full: bool = False
    skipped_by: str = ""  # another instance's id when it held the rebalance lease
    purged: int = 0  # archived memories past the archive's retention, deleted for good


@dataclass(slots=True)
class ZoneCount:
    zone: Zone
    count: int
    capacity: int
    min_score: float


@dataclass(slots=True)
class Stats:
    zones: list[ZoneCount]
    total: int
    embedding_model: str
    dimension: int
    backend: str
    archived: int = 0  # forgotten memories kept in the archive, not counted in total


@dataclass(slots=True, frozen=True)
class AdminEvent:
    """An admin call, in the ledger: who (a key id, never the key) did what to which tenant."""

    id: str
    tenant: str
    method: str
    key_id: str
    at: float


@dataclass(slots=True, frozen=True)
class ZoneEvent:
    """One entry of the append-only ledger: what moved a memory between zones, out of them or
    back. Reasons: "capacity" (evicted outward), "forgotten" (moved into the archive),
    "restored" (from the archive into to_zone), "purged" (the archive's retention ended it) and
    "deleted" (a Delete; a tombstone without the content hash)."""

    id: str
    tenant: str
    memory_id: str
    from_zone: Zone
    to_zone: Zone | None  # None: it left the zones
    reason: str
    at: float
    content_hash: str = ""
