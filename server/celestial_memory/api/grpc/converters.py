"""Protobuf <-> domain translation. No logic beyond shape; validation lives in the domain."""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np
from celestial_client.v1 import memory_pb2 as pb
from celestial_memory.domain.memory_types import MEMORY_TYPES
from celestial_memory.domain.models import (
    AdminEvent,
    Edge,
    Memory,
    MemoryFilter,
    Provenance,
    RebalanceReport,
    RecallResult,
    Stats,
    ZoneEvent,
)
from celestial_memory.domain.next_move import NextMove
from celestial_memory.domain.requests import Imported, MemoryChanges, NewMemory, RecallQuery
from celestial_memory.domain.scoring import ScoreBreakdown
from celestial_memory.domain.validation import MAX_TIME, MIN_TIME
from celestial_memory.domain.zones import Zone
from celestial_memory.errors import InvalidArgument
from celestial_memory.graph.entity_index import EntityCount
from celestial_memory.ops.running_config import ConfigEntry
from celestial_memory.ranking.tuning import Tuned
from celestial_memory.understanding.extraction import MAX_PART, MAX_SUMMARY, MAX_TRIPLES
from celestial_memory.understanding.resolutions import FULL, SUMMARY, TRIPLE
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp


def zone_to_pb(z: Zone) -> pb.Zone:
    return cast(pb.Zone, int(z) + 1)


def zone_from_pb(value: int, field: str) -> Zone:
    if not int(pb.ZONE_CORE) <= value <= int(pb.ZONE_CLOUD):
        raise InvalidArgument(field, f"unknown zone {value}")
    return Zone(value - 1)


def ts_to_pb(t: float) -> Timestamp:
    """Nearest nanosecond. Any time after mid-1970 (2**24 s) comes back from ts_from_pb as the
    same double: a double is coarser than a nanosecond there. A time computed past the years a
    Timestamp holds (1 to 9999: a next move hours after a memory created at the end of 9999) is
    held at that end: JSON cannot write it, so an answer holding it failed over HTTP."""
    return Timestamp(**_ts(t))


def _ts(t: float) -> dict[str, int]:
    """``ts_to_pb``'s fields: an answer's messages take their parts as mappings, which costs
    less than building each part as a message to copy in (a recall's answer: 0.46 -> 0.38 ms)."""
    t = min(max(t, MIN_TIME), MAX_TIME)
    seconds = math.floor(t)
    nanos = round((t - seconds) * 1e9)
    if nanos == 1_000_000_000:
        seconds, nanos = seconds + 1, 0
    return {"seconds": seconds, "nanos": nanos}


def duration_to_pb(seconds: float) -> Duration:
    d = Duration()
    d.FromNanoseconds(round(seconds * 1e9))
    return d


def ts_from_pb(owner: Message, name: str, field: str) -> float | None:
    """The optional Timestamp ``owner.name`` in seconds; ``field`` names it in errors."""
    if not owner.HasField(name):
        return None
    ts: Timestamp = getattr(owner, name)
    if not 0 <= ts.nanos < 1_000_000_000:
        raise InvalidArgument(field, "nanos out of range")
    return ts.seconds + ts.nanos / 1e9


# A score, its terms and a result's relevance are sent to a millionth (the contract says so):
# finer digits are the clock's jitter between two readings, and a freshness of -8e-09 a
# millisecond after a store reads as a fault. Adding 0.0 turns a rounded -0.0 into 0.0.
SCORE_DIGITS = 6


def shown_score(x: float) -> float:
    return round(x, SCORE_DIGITS) + 0.0


def breakdown_to_pb(b: ScoreBreakdown) -> pb.ScoreBreakdown:
    return pb.ScoreBreakdown(**_breakdown(b))


def _breakdown(b: ScoreBreakdown) -> dict[str, float]:
    return {"recall": shown_score(b.recall), "freshness": shown_score(b.freshness),
            "importance": b.importance,  # as given
            "context": shown_score(b.context), "total": shown_score(b.total)}


def next_move_to_pb(move: NextMove | None) -> pb.NextMove | None:
    return None if move is None else pb.NextMove(**_next_move(move))


def _next_move(move: NextMove) -> dict[str, Any]:
    return {"zone": pb.ZONE_UNSPECIFIED if move.zone is None else zone_to_pb(move.zone),
            "at": _ts(move.at), "archive": move.archive}


def memory_to_pb(m: Memory, b: ScoreBreakdown, move: NextMove | None = None) -> pb.Memory:
    return pb.Memory(**_memory(m, b, move))


def _memory(m: Memory, b: ScoreBreakdown, move: NextMove | None) -> dict[str, Any]:
    return dict(
        id=m.id, tenant=m.tenant, content=m.content, zone=zone_to_pb(m.zone),
        score=shown_score(m.score),
        importance=m.importance, recall_count=m.recall_count,
        created_at=_ts(m.created_at), last_recalled_at=_ts(m.last_recalled_at),
        tags=m.tags, session_id=m.session_id, agent_id=m.agent_id, metadata=m.metadata,
        pinned=m.pinned, breakdown=_breakdown(b), context=m.context, archived=m.archived,
        archived_at=None if m.archived_at is None else _ts(m.archived_at),
        merged=[pb.MergedRepeat(content=p.content, created_at=ts_to_pb(p.created_at), id=p.id,
                                session_id=p.session_id, agent_id=p.agent_id,
                                metadata=p.metadata, context=p.context) for p in m.merged],
        relations=[relation_to_pb(e) for e in m.edges], entities=m.entities,
        summary=m.summary,
        triples=[pb.Triple(subject=s, relation=r, object=o) for s, r, o in m.triples],
        understanding=understanding(m),
        next_move=None if move is None else _next_move(move),
        memory_type=type_to_pb(m.memory_type), immutable=m.immutable,
    )


def _text(*parts: str) -> int:
    return sum(4 * len(t) + 6 for t in parts)  # at most 4 bytes a character, tag and length


def memory_size_bound(m: Memory) -> int:
    """At least ``memory_to_pb(m, ...).ByteSize()``, without building it: what a recall checks
    its answer against first, so that the memories are converted once, not twice, unless the
    answer comes near the message limit. Kept beside ``memory_to_pb``; a test holds the two
    together (tests/unit/test_converters.py)."""
    return (1024  # ids, numbers, times, zone, breakdown, next move, type, flags
            + _text(m.id, m.tenant, m.content, m.context, m.summary, m.session_id, m.agent_id,
                    m.understand_error, *m.tags, *m.entities)
            + sum(_text(k, v) + 6 for k, v in m.metadata.items())
            + sum(48 + _text(p.content, p.id, p.session_id, p.agent_id, p.context)
                  + sum(_text(k, v) + 6 for k, v in p.metadata.items()) for p in m.merged)
            + sum(32 + _text(e.other, e.relation, e.made_by) for e in m.edges)
            + sum(6 + _text(*t) for t in m.triples))


def understanding(m: Memory) -> str:
    if m.understand_due is not None:
        return "waiting"
    if m.understand_error:
        return f"failed: {m.understand_error}"
    return "done" if m.understand_tries else ""


def type_to_pb(t: str) -> pb.MemoryType:
    return cast(pb.MemoryType, MEMORY_TYPES.index(t) + 1)


def type_from_pb(value: int, field: str, unset: str = "") -> str:
    """A MemoryType as the domain names it; UNSPECIFIED is ``unset``."""
    if value == pb.MEMORY_TYPE_UNSPECIFIED:
        return unset
    if not 1 <= value <= len(MEMORY_TYPES):
        raise InvalidArgument(field, f"unknown memory type {value}")
    return MEMORY_TYPES[value - 1]


# A Context block's form of each memory (understanding/resolutions.py) on the wire.
RESOLUTIONS = {FULL: pb.RESOLUTION_FULL, SUMMARY: pb.RESOLUTION_SUMMARY,
               TRIPLE: pb.RESOLUTION_TRIPLE}


def relation_to_pb(e: Edge) -> pb.Relation:
    return pb.Relation(id=e.other, relation=e.relation, weight=e.weight, made_by=e.made_by,
                       created_at=ts_to_pb(e.at), outgoing=e.outgoing)


def relation_from_pb(r: pb.Relation, field: str) -> Edge:
    return Edge(r.id, r.relation, r.weight, r.made_by or "caller",
                ts_from_pb(r, "created_at", f"{field}.created_at") or 0.0, r.outgoing)


# More values than any request needs (the settings' own limits, at most MAX_LABELS, are checked
# later, on what these give): a request of a million tags is refused before a million strings
# are made of it. Vectors may be long; labels and metadata are few.
MAX_LISTED = 65_536
MAX_LABELS = 4096


def _listed(values: Any, field: str, bound: int = MAX_LABELS) -> list[Any]:
    if len(values) > bound:
        raise InvalidArgument(field, f"more than {bound} values")
    return list(values)


def _mapped(values: Any, field: str) -> dict[str, str]:
    if len(values) > MAX_LABELS:
        raise InvalidArgument(field, f"more than {MAX_LABELS} entries")
    return dict(values)


def new_memory_from_pb(r: pb.StoreRequest) -> NewMemory:
    return NewMemory(
        content=r.content,
        importance=r.importance if r.HasField("importance") else None,
        tags=_listed(r.tags, "tags"), session_id=r.session_id, agent_id=r.agent_id,
        metadata=_mapped(r.metadata, "metadata"), created_at=ts_from_pb(r, "created_at", "created_at"),
        vector=_listed(r.vector, "vector", MAX_LISTED) or None, id=r.id, pinned=r.pinned,
        context=r.context,
        request_id=r.request_id, upsert=r.upsert,
        memory_type=type_from_pb(r.memory_type, "memory_type"), immutable=r.immutable,
    )


def filter_from_pb(f: pb.RecallFilter, prefix: str = "filter") -> MemoryFilter:
    return MemoryFilter(
        zones=[zone_from_pb(z, f"{prefix}.zones") for z in _listed(f.zones, f"{prefix}.zones")],
        tags_any=_listed(f.tags_any, f"{prefix}.tags_any"),
        tags_all=_listed(f.tags_all, f"{prefix}.tags_all"),
        session_id=f.session_id, agent_id=f.agent_id,
        created_after=ts_from_pb(f, "created_after", f"{prefix}.created_after"),
        created_before=ts_from_pb(f, "created_before", f"{prefix}.created_before"),
        recalled_after=ts_from_pb(f, "recalled_after", f"{prefix}.recalled_after"),
        recalled_before=ts_from_pb(f, "recalled_before", f"{prefix}.recalled_before"),
        min_importance=f.min_importance if f.HasField("min_importance") else None,
        metadata=_mapped(f.metadata, f"{prefix}.metadata"),
        entities_any=_listed(f.entities_any, f"{prefix}.entities_any"),
        memory_types=[type_from_pb(t, f"{prefix}.memory_types", "unspecified")
                      for t in _listed(f.memory_types, f"{prefix}.memory_types")],
    )


def recall_query_from_pb(r: pb.RecallRequest) -> RecallQuery:
    return RecallQuery(
        query=r.query, limit=r.limit, filter=filter_from_pb(r.filter),
        reinforce=not r.no_reinforce, context=r.context,
        query_vector=_listed(r.query_vector, "query_vector", MAX_LISTED) or None,
        min_relevance=r.min_relevance if r.HasField("min_relevance") else None,
        ignore_zones=r.ignore_zones, include_archived=r.include_archived,
        deep=r.deep if r.HasField("deep") else None,
        expand=r.expand if r.HasField("expand") else None,
    )


def recall_result_to_pb(r: RecallResult, now_breakdown: ScoreBreakdown,
                        move: NextMove | None = None) -> pb.RecallResult:
    return pb.RecallResult(
        memory=_memory(r.memory, now_breakdown, move), found_in=zone_to_pb(r.found_in),
        relevance=shown_score(r.relevance), breakdown=_breakdown(r.breakdown), archived=r.archived,
        via=None if r.via is None else pb.Via(from_id=r.via.source, relation=r.via.relation,
                                               weight=r.via.weight, hops=r.via.hops),
    )


def changes_from_pb(r: pb.UpdateRequest) -> MemoryChanges:
    return MemoryChanges(
        content=r.content if r.HasField("content") else None,
        importance=r.importance if r.HasField("importance") else None,
        tags=_listed(r.tags.values, "tags") if r.HasField("tags") else None,
        metadata=_mapped(r.metadata.values, "metadata") if r.HasField("metadata") else None,
        pinned=r.pinned if r.HasField("pinned") else None,
        vector=_listed(r.vector, "vector", MAX_LISTED) or None,
    )


def rebalance_to_pb(rep: RebalanceReport) -> pb.RebalanceResponse:
    moved = [
        pb.ZoneMove(from_zone=zone_to_pb(a), to_zone=zone_to_pb(b), count=n)
        for (a, b), n in sorted(rep.moved.items())
    ]
    return pb.RebalanceResponse(
        scanned=rep.scanned, moved=moved, evicted=rep.evicted, forgotten=rep.forgotten,
        dry_run=rep.dry_run, duration_ms=rep.duration_ms, full=rep.full, skipped_by=rep.skipped_by,
        duration=duration_to_pb(rep.duration_ms / 1000), purged=rep.purged,
    )


def admin_event_to_pb(e: AdminEvent) -> pb.AdminEvent:
    return pb.AdminEvent(id=e.id, tenant=e.tenant, method=e.method, key_id=e.key_id,
                         at=ts_to_pb(e.at))


EVENT_KINDS = {"capacity": pb.ZONE_EVENT_KIND_CAPACITY, "forgotten": pb.ZONE_EVENT_KIND_FORGOTTEN,
               "restored": pb.ZONE_EVENT_KIND_RESTORED, "purged": pb.ZONE_EVENT_KIND_PURGED,
               "deleted": pb.ZONE_EVENT_KIND_DELETED, "merged": pb.ZONE_EVENT_KIND_MERGED,
               "helpful": pb.ZONE_EVENT_KIND_FEEDBACK_HELPFUL,
               "not_helpful": pb.ZONE_EVENT_KIND_FEEDBACK_NOT_HELPFUL,
               "skipped": pb.ZONE_EVENT_KIND_SKIPPED}
CONFIG_SOURCES = {"flag": pb.CONFIG_SOURCE_FLAG, "env": pb.CONFIG_SOURCE_ENV,
                  "default": pb.CONFIG_SOURCE_DEFAULT}


def config_to_pb(entries: list[ConfigEntry]) -> pb.GetConfigResponse:
    return pb.GetConfigResponse(settings=[
        pb.ConfigSetting(name=e.name, value=e.value, source=CONFIG_SOURCES[e.source], env=e.env,
                         secret=e.secret) for e in entries])


BACKENDS = {"edge": pb.STORAGE_BACKEND_EDGE, "qdrant-local": pb.STORAGE_BACKEND_QDRANT_LOCAL,
            "qdrant-remote": pb.STORAGE_BACKEND_QDRANT_REMOTE}


def event_to_pb(e: ZoneEvent) -> pb.ZoneEvent:
    return pb.ZoneEvent(
        id=e.id, tenant=e.tenant, memory_id=e.memory_id, from_zone=zone_to_pb(e.from_zone),
        to_zone=None if e.to_zone is None else zone_to_pb(e.to_zone),
        reason=e.reason, at=ts_to_pb(e.at), content_hash=e.content_hash,
        kind=EVENT_KINDS.get(e.reason, pb.ZONE_EVENT_KIND_UNSPECIFIED),
    )


def stats_to_pb(s: Stats) -> pb.StatsResponse:
    return pb.StatsResponse(
        zones=[
            pb.ZoneStats(zone=zone_to_pb(z.zone), count=z.count, capacity=z.capacity,
                         min_score=z.min_score if math.isfinite(z.min_score) else None)
            for z in s.zones
        ],
        total=s.total, embedding_model=s.embedding_model, dimension=s.dimension,
        backend=s.backend,
        storage_backend=BACKENDS.get(s.backend, pb.STORAGE_BACKEND_UNSPECIFIED),
        archived=s.archived,
    )


def exported_to_pb(m: Memory, b: ScoreBreakdown) -> pb.ExportedMemory:
    assert m.vector is not None and m.index is not None
    memory = memory_to_pb(m, b)
    memory.score = m.score  # exact, not as shown: an Import restores it
    return pb.ExportedMemory(
        memory=memory, vector=m.vector.tolist(),
        context_vector=m.index.context_dense.tolist(), context_score=m.context_score,
        written_at=ts_to_pb(m.written_at),
    )


def imported_from_pb(e: pb.ExportedMemory) -> Imported:
    pm = e.memory
    # Older dumps carry exact times as *_s doubles beside the Timestamps: those win when set.
    created = e.created_at_s or ts_from_pb(pm, "created_at", "memory.created_at") or 0.0
    recalled = e.last_recalled_at_s or ts_from_pb(pm, "last_recalled_at", "memory.last_recalled_at")
    written = e.written_at_s or ts_from_pb(e, "written_at", "written_at") or 0.0
    m = Memory(
        id=pm.id, tenant="", content=pm.content, zone=zone_from_pb(pm.zone, "memory.zone"),
        score=pm.score, importance=pm.importance, recall_count=pm.recall_count,
        created_at=created, last_recalled_at=recalled if recalled is not None else created,
        context_score=e.context_score, tags=list(pm.tags), session_id=pm.session_id,
        agent_id=pm.agent_id, metadata=dict(pm.metadata), pinned=pm.pinned,
        vector=np.asarray(e.vector, dtype=np.float32), context=pm.context,
        written_at=written,
        archived_at=(ts_from_pb(pm, "archived_at", "memory.archived_at") or written or created)
        if pm.archived else None,
        merged=[Provenance(content=r.content, created_at=ts_from_pb(r, "created_at",
                                                                    "memory.merged.created_at")
                           or 0.0, id=r.id, session_id=r.session_id, agent_id=r.agent_id,
                           metadata=dict(r.metadata), context=r.context) for r in pm.merged],
        edges=[relation_from_pb(r, f"memory.relations[{i}]") for i, r in enumerate(pm.relations)],
        entities=list(pm.entities),
        memory_type=type_from_pb(pm.memory_type, "memory.memory_type"), immutable=pm.immutable,
        # Bounded as the model's are (understanding/extraction.py).
        summary=" ".join(pm.summary.split())[:MAX_SUMMARY],
        triples=[(t.subject[:MAX_PART], t.relation[:MAX_PART], t.object[:MAX_PART])
                 for t in pm.triples[:MAX_TRIPLES] if t.subject and t.relation and t.object],
    )
    ctx = np.asarray(e.context_vector, dtype=np.float32) if len(e.context_vector) else None
    return Imported(m, ctx)


def entity_to_pb(e: EntityCount) -> pb.Entity:
    return pb.Entity(id=e.id, kind=e.kind, key=e.key, mentions=e.mentions)


def tuning_to_pb(t: Tuned) -> pb.RankerTuning:
    return pb.RankerTuning(features=list(t.features), weights=list(t.weights), votes=t.votes)


def tuning_from_pb(t: pb.RankerTuning) -> Tuned:
    """An imported layer; the server drops the features it does not compute and holds the
    weights within its bound (ranking/tuning.py)."""
    if len(t.features) != len(t.weights):
        raise InvalidArgument("ranker_tuning.weights", "needs one weight per feature")
    if len(t.features) > 1024:
        raise InvalidArgument("ranker_tuning.features", "at most 1024")
    if t.votes < 0:
        raise InvalidArgument("ranker_tuning.votes", "must be >= 0")
    return Tuned(tuple(t.features), tuple(t.weights), int(t.votes))
