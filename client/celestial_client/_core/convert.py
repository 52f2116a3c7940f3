"""Request builders and response parsers shared by the sync and async clients."""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import cast

from celestial_client.types import (
    MEMORY_TYPES,
    AdminEvent,
    Consolidation,
    Entity,
    EntityProfile,
    EntitySummary,
    ExportedMemory,
    Hop,
    Insight,
    LedgerPage,
    Memory,
    MergedRepeat,
    NextMove,
    PromptContext,
    RebalanceReport,
    RecallResult,
    Reflection,
    RelatedMemory,
    Relation,
    ScoreBreakdown,
    ServerSetting,
    Stats,
    StoreItem,
    Via,
    Zone,
    ZoneEvent,
    ZoneStats,
)
from celestial_client.v1 import memory_pb2 as pb
from google.protobuf.timestamp_pb2 import Timestamp

_ZONES = [Zone.CORE, Zone.INNER, Zone.OUTER, Zone.BELT, Zone.CLOUD]
TimeLike = datetime | float


def zone_to_pb(z: Zone | str) -> pb.Zone:
    return cast(pb.Zone, _ZONES.index(Zone(z)) + 1)


def zone_from_pb(v: int) -> Zone:
    return _ZONES[v - 1]


def type_to_pb(t: str) -> pb.MemoryType:
    """A memory type by name ("" : not set, the server's default)."""
    if not t:
        return pb.MEMORY_TYPE_UNSPECIFIED
    if t not in MEMORY_TYPES:
        raise ValueError(f"unknown memory type {t!r}: one of {', '.join(MEMORY_TYPES)}")
    return cast(pb.MemoryType, MEMORY_TYPES.index(t) + 1)


def type_from_pb(v: int) -> str:
    return MEMORY_TYPES[v - 1] if 1 <= v <= len(MEMORY_TYPES) else "episode"


def timestamp(t: TimeLike) -> Timestamp:
    ts = Timestamp()
    if isinstance(t, datetime):
        ts.FromDatetime(t if t.tzinfo else t.replace(tzinfo=UTC))
    else:
        seconds = math.floor(t)
        nanos = round((t - seconds) * 1e9)
        if nanos == 1_000_000_000:  # rounded up into the next second
            seconds, nanos = seconds + 1, 0
        ts.seconds, ts.nanos = seconds, nanos
    return ts


def to_datetime(ts: Timestamp) -> datetime:
    return ts.ToDatetime(tzinfo=UTC)


def store_request(tenant: str, item: StoreItem) -> pb.StoreRequest:
    """The request for one item. An item with neither id nor request_id gets a fresh
    request_id here, once, so that every retry of this request names the same memory."""
    request_id = item.request_id or ("" if item.id else str(uuid.uuid4()))
    req = pb.StoreRequest(
        tenant=tenant, content=item.content, tags=item.tags, session_id=item.session_id,
        agent_id=item.agent_id, metadata=item.metadata, vector=item.vector or [], id=item.id,
        pinned=item.pinned, context=item.context, request_id=request_id, upsert=item.upsert,
        memory_type=type_to_pb(item.memory_type), immutable=item.immutable,
    )
    if item.importance is not None:
        req.importance = item.importance
    if item.created_at is not None:
        req.created_at.CopyFrom(timestamp(item.created_at))
    return req


def recall_request(
    tenant: str,
    query: str,
    limit: int,
    *,
    zones: Iterable[Zone | str] = (),
    tags_any: Sequence[str] = (),
    tags_all: Sequence[str] = (),
    session_id: str = "",
    agent_id: str = "",
    created_after: TimeLike | None = None,
    created_before: TimeLike | None = None,
    recalled_after: TimeLike | None = None,
    recalled_before: TimeLike | None = None,
    min_importance: float | None = None,
    metadata: Mapping[str, str] | None = None,
    entities_any: Sequence[str] = (),
    memory_types: Sequence[str] = (),
    reinforce: bool = True,
    context: str = "",
    query_vector: Sequence[float] | None = None,
    min_relevance: float | None = None,
    ignore_zones: bool = False,
    include_archived: bool = False,
    deep: bool | None = None,
    expand: int | None = None,
) -> pb.RecallRequest:
    f = pb.RecallFilter(
        zones=[zone_to_pb(z) for z in zones], tags_any=tags_any, tags_all=tags_all,
        session_id=session_id, agent_id=agent_id, metadata=dict(metadata or {}),
        entities_any=entities_any, memory_types=[type_to_pb(t) for t in memory_types],
    )
    for name, value in (
        ("created_after", created_after), ("created_before", created_before),
        ("recalled_after", recalled_after), ("recalled_before", recalled_before),
    ):
        if value is not None:
            getattr(f, name).CopyFrom(timestamp(value))
    if min_importance is not None:
        f.min_importance = min_importance
    req = pb.RecallRequest(
        tenant=tenant, query=query, limit=limit, filter=f, no_reinforce=not reinforce,
        context=context, query_vector=list(query_vector or []), ignore_zones=ignore_zones,
        include_archived=include_archived,
    )
    if min_relevance is not None:
        req.min_relevance = min_relevance
    if deep is not None:
        req.deep = deep
    if expand is not None:  # 0 is sent: it turns expansion off, unlike leaving it out
        req.expand = expand
    return req


def update_request(
    tenant: str,
    memory_id: str,
    *,
    content: str | None = None,
    importance: float | None = None,
    tags: Sequence[str] | None = None,
    metadata: Mapping[str, str] | None = None,
    pinned: bool | None = None,
    vector: Sequence[float] | None = None,
) -> pb.UpdateRequest:
    req = pb.UpdateRequest(tenant=tenant, id=memory_id, vector=list(vector or []))
    if content is not None:
        req.content = content
    if importance is not None:
        req.importance = importance
    if tags is not None:
        req.tags.CopyFrom(pb.StringList(values=list(tags)))
    if metadata is not None:
        req.metadata.CopyFrom(pb.StringMap(values=dict(metadata)))
    if pinned is not None:
        req.pinned = pinned
    return req


def breakdown(b: pb.ScoreBreakdown) -> ScoreBreakdown:
    return ScoreBreakdown(b.recall, b.freshness, b.importance, b.context, b.total)


def relation(r: pb.Relation) -> Relation:
    return Relation(r.id, r.relation, r.weight, r.made_by, to_datetime(r.created_at), r.outgoing)


def memory(m: pb.Memory) -> Memory:
    return Memory(
        id=m.id, tenant=m.tenant, content=m.content, zone=zone_from_pb(m.zone), score=m.score,
        importance=m.importance, recall_count=m.recall_count,
        created_at=to_datetime(m.created_at), last_recalled_at=to_datetime(m.last_recalled_at),
        tags=list(m.tags), session_id=m.session_id, agent_id=m.agent_id,
        metadata=dict(m.metadata), pinned=m.pinned, breakdown=breakdown(m.breakdown),
        context=m.context, archived=m.archived,
        archived_at=to_datetime(m.archived_at) if m.HasField("archived_at") else None,
        merged=[MergedRepeat(r.content, to_datetime(r.created_at), r.id, r.session_id,
                             r.agent_id, dict(r.metadata), r.context) for r in m.merged],
        relations=[relation(r) for r in m.relations], entities=list(m.entities),
        summary=m.summary, triples=[(t.subject, t.relation, t.object) for t in m.triples],
        understanding=m.understanding,
        next_move=next_move(m.next_move) if m.HasField("next_move") else None,
        memory_type=type_from_pb(m.memory_type), immutable=m.immutable,
    )


def next_move(n: pb.NextMove) -> NextMove:
    return NextMove(None if n.archive else zone_from_pb(n.zone), to_datetime(n.at))


def recall_results(resp: pb.RecallResponse) -> list[RecallResult]:
    return [
        RecallResult(memory(r.memory), zone_from_pb(r.found_in), r.relevance,
                     breakdown(r.breakdown), r.archived,
                     Via(r.via.from_id, r.via.relation, r.via.weight, r.via.hops)
                     if r.HasField("via") else None)
        for r in resp.results
    ]


def related(resp: pb.RelatedResponse) -> list[RelatedMemory]:
    return [RelatedMemory(memory(r.memory), [Hop(h.from_id, h.to_id, h.relation, h.weight)
                                             for h in r.path])
            for r in resp.memories]


def entity(e: pb.Entity) -> Entity:
    return Entity(e.id, e.kind, e.key, e.mentions)


def entity_profile(p: pb.EntityProfile) -> EntityProfile:
    return EntityProfile(entity(p.entity), to_datetime(p.first_seen), to_datetime(p.last_seen),
                         [memory(m) for m in p.most_recalled], p.summary, p.summary_id)


def stats(resp: pb.StatsResponse) -> Stats:
    return Stats(
        zones=[
            ZoneStats(zone_from_pb(z.zone), z.count, z.capacity or None,
                      z.min_score if z.HasField("min_score") else None)
            for z in resp.zones
        ],
        total=resp.total, embedding_model=resp.embedding_model, dimension=resp.dimension,
        backend=resp.backend, archived=resp.archived,
    )


CONFIG_SOURCES = {pb.CONFIG_SOURCE_FLAG: "flag", pb.CONFIG_SOURCE_ENV: "env",
                  pb.CONFIG_SOURCE_DEFAULT: "default"}


def server_config(resp: pb.GetConfigResponse) -> dict[str, ServerSetting]:
    """The settings by name, in the server's order; a value as JSON reads it (a secret's, as
    sent: "set" or "")."""
    return {s.name: ServerSetting(s.name, s.value if s.secret else _json_value(s.value),
                                  CONFIG_SOURCES.get(s.source, ""), s.env, s.secret)
            for s in resp.settings}


def _json_value(text: str) -> object:
    try:
        return json.loads(text or "null")
    except ValueError:  # not JSON, as the contract says it is: the text as it came
        return text


def consolidation(resp: pb.ConsolidateResponse) -> Consolidation:
    return Consolidation([(m.into, list(m.ids)) for m in resp.merges], resp.scanned,
                         resp.dry_run, resp.unlisted)


def rebalance(resp: pb.RebalanceResponse) -> RebalanceReport:
    return RebalanceReport(
        scanned=resp.scanned,
        moved={(zone_from_pb(m.from_zone), zone_from_pb(m.to_zone)): m.count for m in resp.moved},
        evicted=resp.evicted, forgotten=resp.forgotten, dry_run=resp.dry_run,
        duration_ms=resp.duration_ms, full=resp.full, skipped_by=resp.skipped_by,
        purged=resp.purged,
    )


def ledger_request(
    tenant: str, since: TimeLike | None, page_size: int, memory_id: str, page_token: str = ""
) -> pb.LedgerRequest:
    req = pb.LedgerRequest(tenant=tenant, page_size=page_size, memory_id=memory_id,
                           page_token=page_token)
    if since is not None:
        req.since.CopyFrom(timestamp(since))
    return req


EVENT_REASONS = {pb.ZONE_EVENT_KIND_CAPACITY: "capacity", pb.ZONE_EVENT_KIND_FORGOTTEN: "forgotten",
                 pb.ZONE_EVENT_KIND_RESTORED: "restored", pb.ZONE_EVENT_KIND_PURGED: "purged",
                 pb.ZONE_EVENT_KIND_DELETED: "deleted", pb.ZONE_EVENT_KIND_MERGED: "merged",
                 pb.ZONE_EVENT_KIND_FEEDBACK_HELPFUL: "helpful",
                 pb.ZONE_EVENT_KIND_FEEDBACK_NOT_HELPFUL: "not_helpful",
                 pb.ZONE_EVENT_KIND_SKIPPED: "skipped"}


def events(resp: pb.LedgerResponse) -> list[ZoneEvent]:
    return [
        ZoneEvent(e.id, e.memory_id, zone_from_pb(e.from_zone),
                  zone_from_pb(e.to_zone) if e.HasField("to_zone") else None,
                  EVENT_REASONS.get(e.kind, e.reason), to_datetime(e.at),
                  e.content_hash)
        for e in resp.events
    ]


def ledger_page(resp: pb.LedgerResponse) -> LedgerPage:
    admin = [AdminEvent(e.id, e.tenant, e.method, e.key_id, to_datetime(e.at))
             for e in resp.admin_events]
    return LedgerPage(events(resp), admin, resp.next_page_token)


def exported(r: pb.ExportedMemory) -> ExportedMemory:
    written = (to_datetime(r.written_at) if r.HasField("written_at")
               else datetime.fromtimestamp(r.written_at_s, UTC))  # an older server's record
    return ExportedMemory(memory(r.memory), list(r.vector), list(r.context_vector),
                          r.context_score, written, r.SerializeToString())


def exported_record(e: ExportedMemory | pb.ExportedMemory) -> pb.ExportedMemory:
    """The wire record of an exported memory: its exported bytes when it has them (exact),
    else built from its fields."""
    if isinstance(e, pb.ExportedMemory):
        return pb.ExportedMemory.FromString(e.SerializeToString())  # the caller's stays as it is
    if e.record:
        return pb.ExportedMemory.FromString(e.record)
    m = e.memory
    return pb.ExportedMemory(
        memory=pb.Memory(
            id=m.id, content=m.content, zone=zone_to_pb(m.zone), score=m.score,
            importance=m.importance, recall_count=m.recall_count,
            created_at=timestamp(m.created_at), last_recalled_at=timestamp(m.last_recalled_at),
            tags=m.tags, session_id=m.session_id, agent_id=m.agent_id, metadata=m.metadata,
            pinned=m.pinned, context=m.context, archived=m.archived,
            archived_at=timestamp(m.archived_at) if m.archived_at is not None else None,
            merged=[pb.MergedRepeat(content=r.content, created_at=timestamp(r.created_at),
                                    id=r.id, session_id=r.session_id, agent_id=r.agent_id,
                                    metadata=r.metadata, context=r.context)
                    for r in m.merged],
            relations=[pb.Relation(id=r.id, relation=r.relation, weight=r.weight,
                                   made_by=r.made_by, created_at=timestamp(r.created_at),
                                   outgoing=r.outgoing) for r in m.relations],
            entities=m.entities, summary=m.summary,
            triples=[pb.Triple(subject=s, relation=r, object=o) for s, r, o in m.triples],
            memory_type=type_to_pb(m.memory_type), immutable=m.immutable),
        vector=e.vector, context_vector=e.context_vector, context_score=e.context_score,
        written_at=timestamp(e.written_at))


def prompt_context(r: pb.ContextResponse) -> PromptContext:
    return PromptContext(r.text, int(r.tokens), r.tokenizer, list(r.included_ids),
                         list(r.folded_ids), list(r.omitted_ids),
                         [RESOLUTIONS.get(f, "full") for f in r.included_resolutions])


RESOLUTIONS = {pb.RESOLUTION_FULL: "full", pb.RESOLUTION_SUMMARY: "summary",
               pb.RESOLUTION_TRIPLE: "triple"}


def reflection(r: pb.ReflectResponse) -> Reflection:
    return Reflection(
        [Insight(i.id, i.content, i.entity, list(i.source_ids), i.created) for i in r.insights],
        [EntitySummary(x.entity, x.summary, x.id, list(x.source_ids)) for x in r.summaries],
        r.dry_run, r.memories_read, r.model_calls, int(r.model_tokens))
