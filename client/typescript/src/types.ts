// What the client takes and returns: plain objects (JSON.stringify works on every one of them),
// times as Date, zones by their short names.

/** The five zones, innermost first. The proto's ZONE_CORE is "core", and so on. */
export const ZONES = ["core", "inner", "outer", "belt", "cloud"] as const;
export type Zone = (typeof ZONES)[number];

/**
 * What a memory is, in the proto's order (MEMORY_TYPE_FACT is "fact", and so on). A plain store
 * is an episode; the others are drawn from episodes.
 */
export const MEMORY_TYPES = ["fact", "preference", "triple", "insight", "episode"] as const;
export type MemoryType = (typeof MEMORY_TYPES)[number];

/** The terms of the memory function for one memory at one moment. */
export interface ScoreBreakdown {
  /** R: recall score in [0, 1]. */
  recall: number;
  /** F: freshness, 0 right after a recall or creation, falling to -1 after a day. */
  freshness: number;
  /** A: importance in [0, 1]. */
  importance: number;
  /** C: similarity to the context in [0, 1]. */
  context: number;
  /** I: the weighted total that decides the zone. */
  total: number;
}

export interface Memory {
  id: string;
  tenant: string;
  content: string;
  zone: Zone;
  /** Score I when the memory was last written. */
  score: number;
  importance: number;
  recallCount: number;
  createdAt: Date;
  lastRecalledAt: Date;
  tags: string[];
  sessionId: string;
  agentId: string;
  metadata: Record<string, string>;
  pinned: boolean;
  breakdown?: ScoreBreakdown;
  /** Context stored and indexed with the memory, not part of its content. */
  context: string;
  /** Forgotten: moved out of the zones into the archive (restore() brings it back). */
  archived: boolean;
  archivedAt?: Date;
  /** Near-duplicates merged into this memory instead of stored as copies. */
  merged: MergedRepeat[];
  /** Its relations to other memories, both directions (relate(), session order, repeats). */
  relations: Relation[];
  /** The entities it mentions, as ids "<kind>:<key>" (see entities()). */
  entities: string[];
  /** Its one-line summary: by rules when stored, by the server's model later. */
  summary: string;
  /** Facts it states as [subject, relation, object]: by simple rules, or the server's model. */
  triples: [string, string, string][];
  /** The model's reading: "" (none asked), "waiting", "done" or "failed: <why>". */
  understanding: string;
  /** Where the rebalance takes it next unless it is recalled first; absent: nothing scheduled. */
  nextMove?: NextMove;
  /** What it is ("episode" for a plain store, and for memories stored before types). */
  memoryType: MemoryType;
  /** Protected: not updated, merged into or forgotten; only an admin key deletes it. */
  immutable: boolean;
}

/** A memory's next scheduled move: into `zone` (absent: the archive) once `at` has passed. */
export interface NextMove {
  zone?: Zone;
  /** Due: the first rebalance after this moves it (at or before now: the next one). */
  at: Date;
  /** Forgetting: the memory leaves the zones for the archive. */
  archive: boolean;
}

/** One relation of a memory, as the memory at this end sees it. */
export interface Relation {
  /** The memory at the other end. */
  id: string;
  /** Its name: 1 to 64 lower-case letters, digits, '_' or '-' (e.g. "follows", "about"). */
  relation: string;
  /** In [0, 1]. */
  weight: number;
  /**
   * Who made it: "caller" (relate()), "session" (each memory follows the previous one of its
   * session), "repeat" (moved from a repeat merged into this memory).
   */
  madeBy: string;
  createdAt: Date;
  /** True when it points from this memory to `id`, false when from `id` to this memory. */
  outgoing: boolean;
}

export interface MergedRepeat {
  content: string;
  createdAt: Date;
  /** The memory it was before a consolidation, or the id its request id names; may be "". */
  id: string;
  sessionId: string;
  agentId: string;
  metadata: Record<string, string>;
  context: string;
}

export interface RecallResult {
  /** The memory, after reinforcement when the recall reinforced. */
  memory: Memory;
  /** The zone it was found in, before reinforcement moved it. */
  foundIn: Zone;
  /** Relevance to the query in [0, 1]. */
  relevance: number;
  breakdown?: ScoreBreakdown;
  /** Found in the archive by a deep recall (not reinforced). */
  archived: boolean;
  /** Set when graph expansion reached it through a relation of another result. */
  via?: Via;
}

/** How a recall's graph expansion reached a result. */
export interface Via {
  /** The result it was reached from. */
  fromId: string;
  /** The relation followed. */
  relation: string;
  /** Its weight. */
  weight: number;
  /** Steps from that result (1 or 2). */
  hops: number;
}

/** Everything a memory is stored with but its content. */
export interface StoreOptions {
  /** In [0, 1]; absent: the server's importance evaluator decides. */
  importance?: number;
  tags?: string[];
  sessionId?: string;
  agentId?: string;
  metadata?: Record<string, string>;
  /** For imports and replays of history; defaults to now. */
  createdAt?: Date;
  /** The embedding, if you compute your own; its length must be the server's dimension. */
  vector?: ArrayLike<number>;
  /** A UUID for the memory; the server assigns one when absent. Makes the store retryable. */
  id?: string;
  pinned?: boolean;
  /** Text indexed with the memory for search, not part of its content. */
  context?: string;
  /**
   * An idempotency key (1 to 128 characters), e.g. `crypto.randomUUID()` once per logical write:
   * the same key names the same memory, so a repeat answers `created: false`. Not with `id`.
   * Makes the store retryable.
   */
  requestId?: string;
  /** With an id or requestId the tenant holds: replace that memory. Not a safe retry. */
  upsert?: boolean;
  /** What the memory is; absent: "episode". */
  memoryType?: MemoryType;
  /** Protected from update, merging and forgetting; only an admin key deletes it. */
  immutable?: boolean;
}

export interface StoreItem extends StoreOptions {
  content: string;
}

export interface StoreResult {
  memory: Memory;
  /** False when the id was already held with the same content and nothing was written. */
  created: boolean;
}

export interface StoreBatchResult {
  /** Ids in the order the items were sent. */
  ids: string[];
  /** How many items the batch held. */
  stored: number;
  /** How many of them were already held with the same content. */
  existing: number;
}

/** What a recall, a page of Recent or List, may be restricted to. Unset fields do not restrict. */
export interface Filter {
  zones?: Zone[];
  /** At least one of these tags. */
  tagsAny?: string[];
  /** All of these tags. */
  tagsAll?: string[];
  sessionId?: string;
  agentId?: string;
  createdAfter?: Date;
  createdBefore?: Date;
  recalledAfter?: Date;
  recalledBefore?: Date;
  minImportance?: number;
  /** Every key equals its value in the memory's metadata. */
  metadata?: Record<string, string>;
  /** Mentions at least one of these entities (ids "<kind>:<key>", see entities()). */
  entitiesAny?: string[];
  /** Of one of these types ("episode" also matches memories stored before types). */
  memoryTypes?: MemoryType[];
}

export interface RecallOptions extends Filter {
  /** 1 to the server's cap (100 by default); default 10. */
  limit?: number;
  /** False: a read-only search, which also makes the call retryable. Default true. */
  reinforce?: boolean;
  /** Context text for C, distinct from the query. */
  context?: string;
  /** The query's embedding, if you compute your own. */
  queryVector?: ArrayLike<number>;
  /** Minimum relevance in [0, 1]; absent: the server's gate. */
  minRelevance?: number;
  /** Rank by relevance alone, ignoring zones. */
  ignoreZones?: boolean;
  /** Search the archive (forgotten memories) too, always. */
  includeArchived?: boolean;
  /** Search the archive only when the zones fall short; absent: the server's default. */
  deep?: boolean;
  /**
   * Graph expansion: memories 1 or 2 steps along relations from the best matches join the
   * candidates (their `via` says how). 0 turns it off; absent: the server's default.
   */
  expand?: number;
}

export interface UpdateChanges {
  content?: string;
  importance?: number;
  /** Replaces the tags; [] clears them. */
  tags?: string[];
  /** Replaces the metadata; {} clears it. */
  metadata?: Record<string, string>;
  pinned?: boolean;
  /** A new embedding for new content, if you compute your own. */
  vector?: ArrayLike<number>;
}

export interface PageOptions {
  /** 0 or absent: the server's default (Recent 10, List 100, Ledger 100); at most 1000. */
  pageSize?: number;
  /** The previous page's nextPageToken, with the other options unchanged. */
  pageToken?: string;
}

export interface MemoryPage {
  memories: Memory[];
  /** Pass as pageToken for the next page; "" after the last page. */
  nextPageToken: string;
}

export interface RelateResult {
  /** False when the relation was there already (its weight was set again). */
  created: boolean;
  /** The relation as `fromId` holds it (outgoing). */
  relation: Relation;
}

export interface RelatedOptions {
  /** Steps along relations: 1 to 3; default 1. */
  depth?: number;
  /** Follow only these relations; absent or []: every relation. */
  relations?: string[];
  /** Memories per page fetched; 0 or absent: the server's default (50); at most 500. */
  pageSize?: number;
}

/**
 * One step of a walk along relations. A walk may follow a relation backwards, so `fromId` and
 * `toId` are the relation's own ends, not the walk's direction.
 */
export interface Hop {
  fromId: string;
  toId: string;
  relation: string;
  weight: number;
}

/** A memory a walk reached (not reinforced), with the steps from the start to it. */
export interface RelatedMemory {
  memory: Memory;
  /** In walk order: the first step leaves the start. */
  path: Hop[];
}

export interface EntitiesOptions {
  /** Entities per page fetched; 0 or absent: the server's default (100); at most 1000. */
  pageSize?: number;
}

/** Something the tenant's memories mention: a name, place, date, number with a unit or title. */
export interface Entity {
  /** "<kind>:<key>", e.g. "name:caroline", "date:2023-05-07". */
  id: string;
  /** "name", "date", "number" or "title". */
  kind: string;
  /** Its normalised form, e.g. "caroline", "2023-05-07", "10 km". */
  key: string;
  /** How many live memories mention it. */
  mentions: number;
}

export interface EntityProfile {
  entity: Entity;
  /** When the first memory mentioning it was created. */
  firstSeen: Date;
  /** When the last one was. */
  lastSeen: Date;
  /** Its most recalled memories (at most 10), most recalled first. */
  mostRecalled: Memory[];
  /** What the last reflect() made of it; empty before. */
  summary: string;
  /** The memory holding the summary; empty when there is none. */
  summaryId: string;
}

/** An insight reflect() wrote (or would): a memory tagged "insight", derived_from its sources. */
export interface Insight {
  id: string;
  content: string;
  /** The entity it is about, "<kind>:<key>". */
  entity: string;
  sourceIds: string[];
  /** Stored by this call (false in a dry run, or when stored before). */
  created: boolean;
}

/** An entity's summary reflect() wrote (or would): its profile's summary from then on. */
export interface EntitySummary {
  entity: string;
  summary: string;
  id: string;
  sourceIds: string[];
}

/** What reflect() wrote (or, in a dry run, would write), and what it cost. */
export interface Reflection {
  insights: Insight[];
  summaries: EntitySummary[];
  dryRun: boolean;
  memoriesRead: number;
  modelCalls: number;
  modelTokens: number;
}

export interface ReflectOptions {
  /** Answer what it would write without writing (the default): pass false to write. */
  dryRun?: boolean;
  /** How many of the newest memories to read; 0 or absent: the server's default. */
  window?: number;
  /** Only these entities ("<kind>:<key>"); absent: the most mentioned of the window. */
  entities?: string[];
  /** Aborting stops the wait and cancels the operation (reflect only). */
  signal?: AbortSignal;
}

export interface ZoneStats {
  zone: Zone;
  count: number;
  /** Absent when the zone is unbounded. */
  capacity?: number;
  /** Lowest score that places a memory in the zone; absent for the Cloud. */
  minScore?: number;
}

export type StorageBackend = "edge" | "qdrant-local" | "qdrant-remote";

export interface Stats {
  /** Core first. */
  zones: ZoneStats[];
  total: number;
  embeddingModel: string;
  dimension: number;
  /** "" only from a server that does not say. */
  backend: StorageBackend | "";
  /** Forgotten memories kept in the archive, not in total. */
  archived: number;
}

export interface RebalanceOptions {
  /** Report what would change without writing. */
  dryRun?: boolean;
  /** Rescore every memory instead of the indexed drop times. */
  full?: boolean;
  /** False: do not forget anything this time. Default true. */
  forget?: boolean;
}

export interface RebalanceReport {
  scanned: number;
  moved: { from: Zone; to: Zone; count: number }[];
  evicted: number;
  forgotten: number;
  dryRun: boolean;
  full: boolean;
  /** Another replica's instance id when it held the rebalance lease (nothing was done). */
  skippedBy: string;
  durationMs: number;
  /** Archived memories deleted for good when the archive's retention passed. */
  purged: number;
}

/** Where a setting's value came from when the server started: a flag of `celestial serve` (for a
 * server built in code, an argument of its settings), its environment variable, or the default. */
export type ConfigSource = "flag" | "env" | "default";

/** One setting of the running server (serverConfig()). */
export interface ServerSetting {
  /** As docs/configuration.md lists it (e.g. "zone_capacities"). */
  name: string;
  /**
   * Its value as JSON reads it: text, a number, a boolean, an array; null when it is unset. A
   * secret's (an API key, a private key's file) is never sent: "set" when it is set, "" when not.
   */
  value: unknown;
  /** "" only from a newer server, with a source this client does not know. */
  source: ConfigSource | "";
  /** The environment variable that sets it (e.g. "CELESTIAL_ZONE_CAPACITIES"). */
  env: string;
  secret: boolean;
}

export type ZoneEventKind =
  "capacity" | "forgotten" | "restored" | "purged" | "deleted" | "merged" | "helpful"
  | "not_helpful" | "skipped";

export interface ZoneEvent {
  id: string;
  tenant: string;
  memoryId: string;
  fromZone: Zone;
  /** Absent when the memory left the zones (kind "forgotten"), or never entered them ("skipped"). */
  toZone?: Zone;
  kind: ZoneEventKind;
  at: Date;
  /** Hash of the memory's content, to recognise it after it is gone. */
  contentHash: string;
}

export interface AdminEvent {
  id: string;
  tenant: string;
  /** E.g. "Rebalance". */
  method: string;
  /** The API key's id, "" without keys; never the key. */
  keyId: string;
  at: Date;
}

export interface LedgerOptions extends PageOptions {
  /** Only events at or after this time. */
  since?: Date;
  /** Only this memory's events (admin events are then left out). */
  memoryId?: string;
}

export interface LedgerPage {
  /** Oldest first. */
  events: ZoneEvent[];
  adminEvents: AdminEvent[];
  nextPageToken: string;
}

/** What the turn policy may decide for a turn, in the contract's order. */
export const TURN_ACTIONS = ["SAVE", "SKIP", "RETRIEVE"] as const;
export type TurnAction = (typeof TURN_ACTIONS)[number];

/** Why the turn policy decided what it did. */
export interface PolicyTrace {
  /** The phase that decided: 0 the retrieve rules, 1 the clear-case rules, 2 the bandit. */
  phase: number;
  /** The rule that decided (phases 0 and 1); "" for the bandit. */
  rule: string;
  /** The turn's importance by the rules, and its terms (cue kind -> weight). */
  importance: number;
  parts: Record<string, number>;
  /** The bandit's bound for each action it weighed ("SAVE", "SKIP"). */
  scores: Record<string, number>;
  /** The chance the chosen action had of being chosen (1 for a rule). */
  probability: number;
  /** The bandit's exploration drew this action instead of its best. */
  explored: boolean;
  /** The state the bandit saw, by feature name. */
  features: Record<string, number>;
  /** For a RETRIEVE: what decided whether the turn is also kept (a rule's name, or "bandit"). */
  keepBy: string;
}

/** One decision of the turn policy. */
export interface PolicyDecision {
  /** What a reward names (per tenant, from 1; 0 for a dry run). */
  id: number;
  action: TurnAction;
  /** Whether the turn is in the zones (SAVE; RETRIEVE when worth keeping); else in the archive. */
  keep: boolean;
  trace: PolicyTrace;
  /** When, by the server's clock. */
  at: Date;
  /** Decided only: nothing was done or learnt. */
  dryRun: boolean;
}

export interface ObserveOptions {
  /** The conversation the turn belongs to (a saved turn's sessionId). */
  sessionId?: string;
  /** Who said it: "user" when absent; an assistant's, system's or tool's question retrieves nothing. */
  role?: string;
  /** The session's earlier turns, oldest first (at most 64): the last few are a saved turn's context. */
  previous?: string[];
  /** Decide only: nothing is stored, recalled or learnt. Makes the call retryable. */
  dryRun?: boolean;
  /** The agent a saved turn is attributed to. */
  agentId?: string;
  /** RETRIEVE: how many memories to consider; absent: 10. */
  limit?: number;
  /** RETRIEVE: the context block's budget in tokens; absent: 1,000. */
  maxTokens?: number;
}

/** What observe() did with a turn. */
export interface Observation {
  decision: PolicyDecision;
  /** The turn as stored: in its zone when kept, archived when skipped; absent for a dry run. */
  memory?: Memory;
  /** The turn was written as a new memory (false: a repeat went into `mergedInto`). */
  created: boolean;
  /** The live memory a repeated turn went into; "" otherwise. */
  mergedInto: string;
  /** RETRIEVE: the memories the context block holds, best first. */
  results: RecallResult[];
  /** RETRIEVE: the block for a prompt ("" when nothing was found). */
  context: string;
  /** RETRIEVE: the block's size in tokens. */
  contextTokens: number;
}

/** A tenant's turn policy (policy()). */
export interface PolicyStatus {
  /** SHA-256 of the rule set and the feature schema the policy decides by. */
  fingerprint: string;
  /** The share of the bandit's decisions drawn at random. */
  exploration: number;
  /** Decisions by action: every one of TURN_ACTIONS, in its order. */
  decisions: Record<TurnAction, number>;
  /** Decisions by the phase that took them: "0", "1" and "2". */
  phases: Record<string, number>;
  /** Turns kept in the zones. */
  kept: number;
  /** Decisions the bandit's exploration drew. */
  explored: number;
  /** Rewards credited to decisions, and their sum. */
  rewards: number;
  rewardSum: number;
  /** Rewards the bandit learnt from. */
  updates: number;
  /** What the rules' decisions were credited, by "phase:rule" (no reward changes a rule). */
  rewardByRule: Record<string, number>;
  /** The last decisions, newest first. */
  last: PolicyDecision[];
  /** When the policy was last saved to the store; absent: never. */
  savedAt?: Date;
}
