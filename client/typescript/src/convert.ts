// Between the generated messages and the plain objects of types.ts.
import { create } from "@bufbuild/protobuf";
import { type Duration, type Timestamp, timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import * as pb from "./gen/celestial/v1/memory_pb.js";
import {
  type AdminEvent,
  type ConfigSource,
  type Entity,
  type EntityProfile,
  type LedgerPage,
  type Filter,
  type Memory,
  type MemoryPage,
  type MemoryType,
  MEMORY_TYPES,
  type Observation,
  type ObserveOptions,
  type PolicyDecision,
  type PolicyStatus,
  type RebalanceReport,
  type RecallOptions,
  type RecallResult,
  type Reflection,
  type RelatedMemory,
  type Relation,
  type ScoreBreakdown,
  type ServerSetting,
  type Stats,
  type StorageBackend,
  type StoreItem,
  TURN_ACTIONS,
  type TurnAction,
  type UpdateChanges,
  type Zone,
  type ZoneEvent,
  type ZoneEventKind,
  ZONES,
} from "./types";

export function zone(z: pb.Zone): Zone {
  const name = ZONES[z - 1];
  if (z < 1 || name === undefined) {
    // The service never sends ZONE_UNSPECIFIED as a zone; anything else is a newer contract.
    throw new Error(`the server sent zone ${z}, which this client does not know`);
  }
  return name;
}

export function zoneToPb(z: Zone): pb.Zone {
  const i = ZONES.indexOf(z);
  if (i < 0) {
    throw new TypeError(`unknown zone ${JSON.stringify(z)}; one of ${ZONES.join(", ")}`);
  }
  return i + 1;
}

export function memoryType(t: pb.MemoryType): MemoryType {
  // Unset or unknown (a newer contract): an episode, as a memory stored before types.
  return MEMORY_TYPES[t - 1] ?? "episode";
}

export function memoryTypeToPb(t: MemoryType | undefined): pb.MemoryType {
  if (t === undefined) {
    return pb.MemoryType.UNSPECIFIED;
  }
  const i = MEMORY_TYPES.indexOf(t);
  if (i < 0) {
    throw new TypeError(`unknown memory type ${JSON.stringify(t)}; one of ${MEMORY_TYPES.join(", ")}`);
  }
  return i + 1;
}

function vector(v: ArrayLike<number> | undefined): number[] {
  return v === undefined ? [] : Array.from(v);
}

export function date(d: Timestamp | undefined): Date {
  return d === undefined ? new Date(0) : timestampDate(d);
}

/** A Date as a Timestamp; undefined stays unset. */
export function timestamp(d: Date | undefined): Timestamp | undefined {
  return d === undefined ? undefined : timestampFromDate(d);
}

/** An int64 as a number (the proto's counts stay far below 2^53). */
function n(v: bigint): number {
  return Number(v);
}

function numbers(m: Record<string, bigint>): Record<string, number> {
  return Object.fromEntries(Object.entries(m).map(([k, v]) => [k, Number(v)]));
}

function breakdown(b: pb.ScoreBreakdown | undefined): ScoreBreakdown | undefined {
  return b && {
    recall: b.recall, freshness: b.freshness, importance: b.importance, context: b.context,
    total: b.total,
  };
}

export function relation(r: pb.Relation | undefined): Relation {
  if (r === undefined) {
    throw new Error("the server sent a response without its relation");
  }
  return {
    id: r.id, relation: r.relation, weight: r.weight, madeBy: r.madeBy,
    createdAt: date(r.createdAt), outgoing: r.outgoing,
  };
}

export function memory(m: pb.Memory | undefined): Memory {
  if (m === undefined) {
    throw new Error("the server sent a response without its memory");
  }
  const out: Memory = {
    id: m.id, tenant: m.tenant, content: m.content, zone: zone(m.zone), score: m.score,
    importance: m.importance, recallCount: n(m.recallCount), createdAt: date(m.createdAt),
    lastRecalledAt: date(m.lastRecalledAt), tags: m.tags, sessionId: m.sessionId,
    agentId: m.agentId, metadata: m.metadata, pinned: m.pinned, context: m.context,
    archived: m.archived,
    merged: m.merged.map((r) => ({
      content: r.content, createdAt: date(r.createdAt), id: r.id, sessionId: r.sessionId,
      agentId: r.agentId, metadata: r.metadata, context: r.context,
    })),
    relations: m.relations.map(relation), entities: m.entities, summary: m.summary,
    triples: m.triples.map((t): [string, string, string] => [t.subject, t.relation, t.object]),
    understanding: m.understanding,
    memoryType: memoryType(m.memoryType), immutable: m.immutable,
  };
  if (m.archivedAt !== undefined) {
    out.archivedAt = date(m.archivedAt);
  }
  if (m.nextMove !== undefined) {
    out.nextMove = m.nextMove.archive
      ? { at: date(m.nextMove.at), archive: true }
      : { zone: zone(m.nextMove.zone), at: date(m.nextMove.at), archive: false };
  }
  const b = breakdown(m.breakdown);
  if (b) {
    out.breakdown = b;
  }
  return out;
}

export function storeRequest(tenant: string, item: StoreItem): pb.StoreRequest {
  return create(pb.StoreRequestSchema, {
    tenant, content: item.content, importance: item.importance, tags: item.tags,
    sessionId: item.sessionId, agentId: item.agentId, metadata: item.metadata,
    createdAt: timestamp(item.createdAt), vector: vector(item.vector), id: item.id, pinned: item.pinned,
    context: item.context, requestId: item.requestId, upsert: item.upsert,
    memoryType: memoryTypeToPb(item.memoryType), immutable: item.immutable,
  });
}

export function filter(f: Filter): pb.RecallFilter {
  return create(pb.RecallFilterSchema, {
    zones: (f.zones ?? []).map(zoneToPb), tagsAny: f.tagsAny, tagsAll: f.tagsAll,
    sessionId: f.sessionId, agentId: f.agentId, createdAfter: timestamp(f.createdAfter),
    createdBefore: timestamp(f.createdBefore), recalledAfter: timestamp(f.recalledAfter),
    recalledBefore: timestamp(f.recalledBefore), minImportance: f.minImportance, metadata: f.metadata,
    entitiesAny: f.entitiesAny, memoryTypes: (f.memoryTypes ?? []).map(memoryTypeToPb),
  });
}

export function recallRequest(tenant: string, query: string, o: RecallOptions): pb.RecallRequest {
  return create(pb.RecallRequestSchema, {
    tenant, query, limit: o.limit, filter: filter(o), noReinforce: o.reinforce === false,
    context: o.context, queryVector: vector(o.queryVector), minRelevance: o.minRelevance,
    ignoreZones: o.ignoreZones, includeArchived: o.includeArchived, deep: o.deep,
    // 0 is sent: it turns expansion off, unlike leaving it out.
    expand: o.expand,
  });
}

export function recallResults(r: { results: pb.RecallResult[] }): RecallResult[] {
  return r.results.map((x) => {
    const out: RecallResult = {
      memory: memory(x.memory), foundIn: zone(x.foundIn), relevance: x.relevance,
      archived: x.archived,
    };
    const b = breakdown(x.breakdown);
    if (b) {
      out.breakdown = b;
    }
    if (x.via) {
      out.via = {
        fromId: x.via.fromId, relation: x.via.relation, weight: x.via.weight, hops: x.via.hops,
      };
    }
    return out;
  });
}

export function related(r: pb.RelatedResponse): RelatedMemory[] {
  return r.memories.map((x) => ({
    memory: memory(x.memory),
    path: x.path.map((h) => ({
      fromId: h.fromId, toId: h.toId, relation: h.relation, weight: h.weight,
    })),
  }));
}

export function entity(e: pb.Entity | undefined): Entity {
  if (e === undefined) {
    throw new Error("the server sent a profile without its entity");
  }
  return { id: e.id, kind: e.kind, key: e.key, mentions: n(e.mentions) };
}

export function entityProfile(p: pb.EntityProfile | undefined): EntityProfile {
  if (p === undefined) {
    throw new Error("the server sent a response without the entity's profile");
  }
  return {
    entity: entity(p.entity), firstSeen: date(p.firstSeen), lastSeen: date(p.lastSeen),
    mostRecalled: p.mostRecalled.map(memory), summary: p.summary, summaryId: p.summaryId,
  };
}

export function reflection(r: pb.ReflectResponse): Reflection {
  return {
    insights: r.insights.map((i) => ({
      id: i.id, content: i.content, entity: i.entity, sourceIds: i.sourceIds, created: i.created,
    })),
    summaries: r.summaries.map((x) => ({
      entity: x.entity, summary: x.summary, id: x.id, sourceIds: x.sourceIds,
    })),
    dryRun: r.dryRun, memoriesRead: r.memoriesRead, modelCalls: r.modelCalls,
    modelTokens: n(r.modelTokens),
  };
}

export function updateRequest(tenant: string, id: string, c: UpdateChanges): pb.UpdateRequest {
  return create(pb.UpdateRequestSchema, {
    tenant, id, content: c.content, importance: c.importance,
    // Wrapped, so that "clear them" ([] or {}) differs from "leave them".
    tags: c.tags && { values: c.tags }, metadata: c.metadata && { values: c.metadata },
    pinned: c.pinned, vector: vector(c.vector),
  });
}

export function page(r: { memories: pb.Memory[]; nextPageToken: string }): MemoryPage {
  return { memories: r.memories.map(memory), nextPageToken: r.nextPageToken };
}

const BACKENDS: Record<number, StorageBackend> = {
  [pb.StorageBackend.EDGE]: "edge",
  [pb.StorageBackend.QDRANT_LOCAL]: "qdrant-local",
  [pb.StorageBackend.QDRANT_REMOTE]: "qdrant-remote",
};

export function stats(s: pb.StatsResponse): Stats {
  return {
    zones: s.zones.map((z) => ({
      zone: zone(z.zone), count: n(z.count),
      ...(z.capacity > 0 ? { capacity: n(z.capacity) } : {}),
      // Servers before the optional field sent the Cloud's bound as -Infinity, which JSON
      // cannot carry: read it as "no bound", as newer servers say it.
      ...(z.minScore !== undefined && Number.isFinite(z.minScore) ? { minScore: z.minScore } : {}),
    })),
    total: n(s.total), embeddingModel: s.embeddingModel, dimension: s.dimension,
    backend: BACKENDS[s.storageBackend] ?? (s.backend as StorageBackend | ""),
    archived: n(s.archived),
  };
}

export function millis(d: Duration | undefined): number | undefined {
  return d && Number(d.seconds) * 1000 + d.nanos / 1e6;
}

export function rebalance(r: pb.RebalanceResponse): RebalanceReport {
  return {
    scanned: n(r.scanned),
    moved: r.moved.map((m) => ({ from: zone(m.fromZone), to: zone(m.toZone), count: n(m.count) })),
    evicted: n(r.evicted), forgotten: n(r.forgotten), dryRun: r.dryRun, full: r.full,
    skippedBy: r.skippedBy, durationMs: millis(r.duration) ?? r.durationMs, purged: n(r.purged),
  };
}

const CONFIG_SOURCES: Record<number, ConfigSource> = {
  [pb.ConfigSource.FLAG]: "flag",
  [pb.ConfigSource.ENV]: "env",
  [pb.ConfigSource.DEFAULT]: "default",
};

/** The settings by name, in the server's order; a value as JSON reads it (a secret's as sent). */
export function serverConfig(r: pb.GetConfigResponse): Record<string, ServerSetting> {
  return Object.fromEntries(r.settings.map((s): [string, ServerSetting] => [s.name, {
    name: s.name, value: s.secret ? s.value : jsonValue(s.value),
    source: CONFIG_SOURCES[s.source] ?? "", env: s.env, secret: s.secret,
  }]));
}

function jsonValue(text: string): unknown {
  try {
    return JSON.parse(text || "null");
  } catch {
    return text; // not JSON, as the contract says it is: the text as it came
  }
}

const EVENT_KINDS: Record<number, ZoneEventKind> = {
  [pb.ZoneEventKind.CAPACITY]: "capacity",
  [pb.ZoneEventKind.FORGOTTEN]: "forgotten",
  [pb.ZoneEventKind.RESTORED]: "restored",
  [pb.ZoneEventKind.PURGED]: "purged",
  [pb.ZoneEventKind.DELETED]: "deleted",
  [pb.ZoneEventKind.MERGED]: "merged",
  [pb.ZoneEventKind.FEEDBACK_HELPFUL]: "helpful",
  [pb.ZoneEventKind.FEEDBACK_NOT_HELPFUL]: "not_helpful",
  [pb.ZoneEventKind.SKIPPED]: "skipped",
};

function zoneEvent(e: pb.ZoneEvent): ZoneEvent {
  // An older server may send only the reason.
  const kind = EVENT_KINDS[e.kind] ?? (e.reason === "forgotten" ? "forgotten" : "capacity");
  return {
    id: e.id, tenant: e.tenant, memoryId: e.memoryId, fromZone: zone(e.fromZone),
    ...(e.toZone !== undefined && e.toZone !== pb.Zone.UNSPECIFIED ? { toZone: zone(e.toZone) } : {}),
    kind, at: date(e.at), contentHash: e.contentHash,
  };
}

function adminEvent(e: pb.AdminEvent): AdminEvent {
  return { id: e.id, tenant: e.tenant, method: e.method, keyId: e.keyId, at: date(e.at) };
}

export function ledger(r: pb.LedgerResponse): LedgerPage {
  return {
    events: r.events.map(zoneEvent), adminEvents: r.adminEvents.map(adminEvent),
    nextPageToken: r.nextPageToken,
  };
}

export function observeRequest(tenant: string, text: string, o: ObserveOptions): pb.ObserveRequest {
  return create(pb.ObserveRequestSchema, {
    tenant, text, sessionId: o.sessionId, role: o.role, previous: o.previous, dryRun: o.dryRun,
    agentId: o.agentId, limit: o.limit, maxTokens: o.maxTokens,
  });
}

function turnAction(a: pb.TurnAction): TurnAction {
  const name = TURN_ACTIONS[a - 1];
  if (a < 1 || name === undefined) {
    throw new Error(`the server sent turn action ${a}, which this client does not know`);
  }
  return name;
}

export function decision(d: pb.PolicyDecision | undefined): PolicyDecision {
  if (d === undefined) {
    throw new Error("the server sent a response without its decision");
  }
  const t = d.trace;
  return {
    id: n(d.id), action: turnAction(d.action), keep: d.keep,
    trace: {
      phase: t?.phase ?? 0, rule: t?.rule ?? "", importance: t?.importance ?? 0,
      parts: t?.parts ?? {}, scores: t?.scores ?? {}, probability: t?.probability ?? 0,
      explored: t?.explored ?? false, features: t?.features ?? {}, keepBy: t?.keepBy ?? "",
    },
    at: date(d.at), dryRun: d.dryRun,
  };
}

export function observation(r: pb.ObserveResponse): Observation {
  const out: Observation = {
    decision: decision(r.decision), created: r.created, mergedInto: r.mergedInto,
    results: recallResults(r),
    context: r.context, contextTokens: r.contextTokens,
  };
  if (r.memory !== undefined) {
    out.memory = memory(r.memory);
  }
  return out;
}

export function policyStatus(r: pb.GetPolicyResponse): PolicyStatus {
  // Every action and phase, in order (0 when the server sent none), so they read the same.
  const sent = { decisions: numbers(r.decisions), phases: numbers(r.phases) };
  const decisions = Object.fromEntries(TURN_ACTIONS.map((a) => [a, sent.decisions[a] ?? 0])) as
    Record<TurnAction, number>;
  const phases = Object.fromEntries(["0", "1", "2"].map((p) => [p, sent.phases[p] ?? 0]));
  const out: PolicyStatus = {
    fingerprint: r.fingerprint, exploration: r.exploration,
    decisions: { ...decisions, ...sent.decisions }, phases: { ...phases, ...sent.phases },
    kept: n(r.kept), explored: n(r.explored), rewards: n(r.rewards), rewardSum: r.rewardSum,
    updates: n(r.updates), rewardByRule: r.rewardByRule, last: r.last.map(decision),
  };
  if (r.savedAt !== undefined) {
    out.savedAt = date(r.savedAt);
  }
  return out;
}
