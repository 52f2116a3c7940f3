// What the client takes and returns: plain objects (JSON.stringify works on every one of them),
// times as Date, zones by their short names.

/** The five zones, innermost first. The proto's ZONE_CORE is "core", and so on. */
export const ZONES = ["core", "inner", "outer", "belt", "cloud"] as const;
export type Zone = (typeof ZONES)[number];

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

export type ZoneEventKind =
  "capacity" | "forgotten" | "restored" | "purged" | "deleted" | "merged";

export interface ZoneEvent {
  id: string;
  tenant: string;
  memoryId: string;
  fromZone: Zone;
  /** Absent when the memory left the zones (kind "forgotten"). */
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
