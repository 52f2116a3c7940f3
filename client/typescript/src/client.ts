import { setTimeout as sleep } from "node:timers/promises";
import { isDeepStrictEqual } from "node:util";
import { create } from "@bufbuild/protobuf";
import { type CallOptions, type Client, createClient } from "@connectrpc/connect";
import type { Http2SessionManager } from "@connectrpc/connect-node";
import { type CelestialClientOptions, grpcTransport, type RetryPolicy } from "./connection";
import * as cv from "./convert";
import { CelestialError, toCelestialError } from "./errors";
import * as pb from "./gen/celestial/v1/memory_pb.js";
import * as ops from "./operations";
import type { Operation, OperationPage, StartReflectionOptions } from "./operations";
import type {
  EntitiesOptions,
  Entity,
  EntityProfile,
  Filter,
  LedgerOptions,
  LedgerPage,
  Memory,
  MemoryPage,
  Observation,
  ObserveOptions,
  PageOptions,
  PolicyStatus,
  RebalanceOptions,
  RebalanceReport,
  RecallOptions,
  RecallResult,
  Reflection,
  ReflectOptions,
  RelatedMemory,
  RelatedOptions,
  RelateResult,
  ServerSetting,
  Stats,
  StoreBatchResult,
  StoreItem,
  StoreOptions,
  StoreResult,
  UpdateChanges,
} from "./types";

// Here too, where they were first exported.
export type {
  CelestialClientOptions, Pem, RetryPolicy, TlsOptions, TransportOptions,
} from "./connection";

type Unary<Req, Res> = (req: Req, options: CallOptions) => Promise<Res>;
type ServerStream<Req, Res> = (req: Req, options: CallOptions) => AsyncIterable<Res>;
type RecentOptions = Filter & PageOptions;

/** A store the server answers the same when repeated: one naming its memory, not replacing it. */
function retryableStore(item: StoreItem): boolean {
  return Boolean((item.id || item.requestId) && !item.upsert);
}

/**
 * A client of one Celestial Memory server. Every method returns plain objects and rejects with a
 * `CelestialError`. `close()` releases its connection.
 */
export class CelestialClient {
  /**
   * The Connect client of the generated `MemoryService` (over gRPC, on this client's connection),
   * for the methods this class does not wrap (Export, Import).
   */
  readonly stub: Client<typeof pb.MemoryService>;
  readonly tenant: string;
  readonly timeoutMs: number;
  private readonly baseMetadata: Headers;
  /** The HTTP/2 connection, closed by close(). */
  private readonly session: Http2SessionManager;
  private readonly retry: Required<RetryPolicy>;
  /** Whether the connection uses TLS, for the hint a failed connection's error may carry. */
  private readonly tls: boolean;

  constructor(options: CelestialClientOptions | string) {
    const o = typeof options === "string" ? { address: options } : options;
    const { transport, session } = grpcTransport(o);
    this.stub = createClient(pb.MemoryService, transport);
    this.session = session;
    this.tls = Boolean(o.tls);
    this.tenant = o.tenant ?? "";
    this.timeoutMs = o.timeoutMs ?? 30_000;
    this.baseMetadata = new Headers(o.metadata);
    if (o.apiKey) {
      this.baseMetadata.set("authorization", `Bearer ${o.apiKey}`);
    }
    const r = typeof o.retries === "number" ? { maxRetries: o.retries } : o.retries;
    this.retry = {
      maxRetries: r?.maxRetries ?? 2, initialBackoffMs: r?.initialBackoffMs ?? 100,
      maxBackoffMs: r?.maxBackoffMs ?? 5000,
    };
  }

  /** Stores one memory. Retried only when it carries an `id` or a `requestId` (and no `upsert`). */
  async store(content: string | StoreItem, options: StoreOptions = {}): Promise<StoreResult> {
    const item = typeof content === "string" ? { ...options, content } : { ...content, ...options };
    const resp = await this.unary(this.stub.store.bind(this.stub),
      cv.storeRequest(this.tenant, item), retryableStore(item));
    return { memory: cv.memory(resp.memory), created: resp.created };
  }

  /**
   * Stores many memories in one stream, all or nothing. Retried only when every item carries an
   * `id` or a `requestId`.
   */
  async storeBatch(items: readonly (string | StoreItem)[]): Promise<StoreBatchResult> {
    const requests = items.map((i) =>
      cv.storeRequest(this.tenant, typeof i === "string" ? { content: i } : i));
    const retryable = items.every((i) => typeof i !== "string" && retryableStore(i));
    const resp = await this.attempts(retryable, (options) =>
      this.stub.storeBatch((async function* () {
        yield* requests;
      })(), options));
    return { ids: resp.ids, stored: resp.stored, existing: resp.existing };
  }

  /**
   * The memories most relevant to `query`, best first, reinforced unless `reinforce: false`
   * (only then is the call retried).
   */
  async recall(query: string, options: RecallOptions = {}): Promise<RecallResult[]> {
    const resp = await this.unary(this.stub.recall.bind(this.stub),
      cv.recallRequest(this.tenant, query, options), options.reinforce === false);
    return cv.recallResults(resp);
  }

  /** One memory, without reinforcing it. */
  async get(id: string): Promise<Memory> {
    const resp = await this.unary(this.stub.get.bind(this.stub),
      create(pb.GetRequestSchema, { tenant: this.tenant, id }), true);
    return cv.memory(resp.memory);
  }

  /** Changes the fields given; the memory is rescored and re-placed. */
  async update(id: string, changes: UpdateChanges): Promise<Memory> {
    const resp = await this.unary(this.stub.update.bind(this.stub),
      cv.updateRequest(this.tenant, id, changes), true);
    return cv.memory(resp.memory);
  }

  /** True when the memory existed and is gone. */
  async delete(id: string): Promise<boolean> {
    const resp = await this.unary(this.stub.delete.bind(this.stub),
      create(pb.DeleteRequestSchema, { tenant: this.tenant, id }), true);
    return resp.deleted;
  }

  /**
   * Says whether a memory (one a recall returned) helped: its importance moves toward 1
   * (helpful) or toward 0, it is re-placed, and the vote is a ledger event. Not retried: every
   * call is a vote.
   */
  async feedback(id: string, helpful: boolean): Promise<Memory> {
    const verdict = helpful ? pb.Verdict.HELPFUL : pb.Verdict.NOT_HELPFUL;
    const resp = await this.unary(this.stub.feedback.bind(this.stub),
      create(pb.FeedbackRequestSchema, { tenant: this.tenant, id, verdict }), false);
    return cv.memory(resp.memory);
  }

  /**
   * One conversation turn, and the memory decides what to do with it (the turn policy): SAVE
   * stores it (`previous`, the session's earlier turns, as its context); SKIP writes it straight
   * into the archive (a recall with `includeArchived` or `deep` still finds it, restore() brings
   * it back); RETRIEVE answers the context block and the memories in it, and keeps the turn too
   * when it is worth keeping. The decision says why (`decision.trace`). Not retried, unless a dry
   * run (`dryRun`: decide only, nothing stored, recalled or learnt): every call is a turn.
   */
  async observe(text: string, options: ObserveOptions = {}): Promise<Observation> {
    const resp = await this.unary(this.stub.observe.bind(this.stub),
      cv.observeRequest(this.tenant, text, options), options.dryRun === true);
    return cv.observation(resp);
  }

  /**
   * The tenant's turn policy: its counts by action and phase, exploration, rewards and updates,
   * and its `last` decisions with their traces, newest first (absent or 0: 20; at most 256).
   */
  async policy(last = 0): Promise<PolicyStatus> {
    const resp = await this.unary(this.stub.getPolicy.bind(this.stub),
      create(pb.GetPolicyRequestSchema, { tenant: this.tenant, last }), true);
    return cv.policyStatus(resp);
  }

  /**
   * Starts the tenant's turn policy again: what it learnt, its counts and its log are dropped; its
   * memories stay. How many decisions the dropped policy had taken (a retry answers 0).
   */
  async resetPolicy(): Promise<number> {
    const resp = await this.unary(this.stub.resetPolicy.bind(this.stub),
      create(pb.ResetPolicyRequestSchema, { tenant: this.tenant }), true);
    return Number(resp.decisions);
  }

  /** Brings an archived (forgotten) memory back into the zones; a live one is returned as is. */
  async restore(id: string): Promise<Memory> {
    const resp = await this.unary(this.stub.restore.bind(this.stub),
      create(pb.RestoreRequestSchema, { tenant: this.tenant, id }), true);
    return cv.memory(resp.memory);
  }

  async stats(): Promise<Stats> {
    const resp = await this.unary(this.stub.stats.bind(this.stub),
      create(pb.StatsRequestSchema, { tenant: this.tenant }), true);
    return cv.stats(resp);
  }

  /** One page of the newest memories matching the filter, newest first. */
  async recent(options: RecentOptions = {}): Promise<MemoryPage> {
    const req = create(pb.RecentRequestSchema, {
      tenant: this.tenant, filter: cv.filter(options), pageSize: options.pageSize,
      pageToken: options.pageToken,
    });
    return cv.page(await this.unary(this.stub.recent.bind(this.stub), req, true));
  }

  /** One page of the memories matching the filter, in id order. */
  async list(options: RecentOptions = {}): Promise<MemoryPage> {
    const req = create(pb.ListRequestSchema, {
      tenant: this.tenant, filter: cv.filter(options), pageSize: options.pageSize,
      pageToken: options.pageToken,
    });
    return cv.page(await this.unary(this.stub.list.bind(this.stub), req, true));
  }

  /** Every memory `recent` pages through, newest first, fetching a page at a time. */
  recentAll(options: RecentOptions = {}): AsyncGenerator<Memory, void, undefined> {
    return this.follow(options.pageToken ?? "", async (pageToken) => {
      const p = await this.recent({ ...options, pageToken });
      return [p.memories, p.nextPageToken];
    });
  }

  /** Every memory `list` pages through, in id order, fetching a page at a time. */
  listAll(options: RecentOptions = {}): AsyncGenerator<Memory, void, undefined> {
    return this.follow(options.pageToken ?? "", async (pageToken) => {
      const p = await this.list({ ...options, pageToken });
      return [p.memories, p.nextPageToken];
    });
  }

  /**
   * Relates two memories of the tenant: a directed edge named `relation` (lower-case letters,
   * digits, '_' or '-') from `fromId` to `toId`, weighing `weight` (0 to 1; absent: 1). Relating
   * them again sets the weight, so the call is retried (a retry may answer `created: false`).
   */
  async relate(
    fromId: string, toId: string, relation: string, weight?: number,
  ): Promise<RelateResult> {
    const req = create(pb.RelateRequestSchema, { tenant: this.tenant, fromId, toId, relation, weight });
    const resp = await this.unary(this.stub.relate.bind(this.stub), req, true);
    return { created: resp.created, relation: cv.relation(resp.relation) };
  }

  /**
   * Removes the relation from `fromId` to `toId` (every one in that direction when `relation` is
   * absent or ""). How many were removed: 0 when none was there.
   */
  async unrelate(fromId: string, toId: string, relation = ""): Promise<number> {
    const req = create(pb.UnrelateRequestSchema, { tenant: this.tenant, fromId, toId, relation });
    const resp = await this.unary(this.stub.unrelate.bind(this.stub), req, true);
    return resp.removed;
  }

  /**
   * The memories a walk of `depth` steps (1 to 3) along relations reaches from memory `id`, in
   * either direction and only along `relations` when given, nearest first, each with its path;
   * every page, fetched `pageSize` at a time. Nothing is reinforced.
   */
  async related(id: string, options: RelatedOptions = {}): Promise<RelatedMemory[]> {
    const out: RelatedMemory[] = [];
    for await (const r of this.follow("", async (pageToken) => {
      const req = create(pb.RelatedRequestSchema, {
        tenant: this.tenant, id, depth: options.depth, relations: options.relations,
        pageSize: options.pageSize, pageToken,
      });
      const resp = await this.unary(this.stub.related.bind(this.stub), req, true);
      return [cv.related(resp), resp.nextPageToken];
    })) {
      out.push(r);
    }
    return out;
  }

  /**
   * The entities the tenant's memories mention (names, places, dates, numbers with units,
   * quoted titles), most mentioned first; every page, fetched `pageSize` at a time.
   */
  async entities(options: EntitiesOptions = {}): Promise<Entity[]> {
    const out: Entity[] = [];
    for await (const e of this.follow("", async (pageToken) => {
      const req = create(pb.EntitiesRequestSchema, {
        tenant: this.tenant, pageSize: options.pageSize, pageToken,
      });
      const resp = await this.unary(this.stub.entities.bind(this.stub), req, true);
      return [resp.entities.map(cv.entity), resp.nextPageToken];
    })) {
      out.push(e);
    }
    return out;
  }

  /** One entity's profile, by its id "<kind>:<key>" (NOT_FOUND when no memory mentions it). */
  async entity(entityId: string): Promise<EntityProfile> {
    const resp = await this.unary(this.stub.entities.bind(this.stub),
      create(pb.EntitiesRequestSchema, { tenant: this.tenant, entity: entityId }), true);
    return cv.entityProfile(resp.profile);
  }

  /**
   * Insights about the entities of the tenant's newest memories, by the server's model: stored
   * as memories tagged "insight", related derived_from their sources, with a summary per entity
   * (its profile's). A dry run unless `dryRun: false`. FAILED_PRECONDITION when the server has
   * no model. Starts the reflection as an operation and watches it to its end (startReflection,
   * watchOperation), so `timeoutMs` bounds each call, not the reflection; a failed one rejects
   * with its error. Aborting `signal`, or a watch that fails, cancels it (best effort).
   */
  async reflect(options: ReflectOptions = {}): Promise<Reflection> {
    const { signal, ...start } = options;
    signal?.throwIfAborted();
    const started = await this.startReflection(start);
    let last = started;
    try {
      for await (const op of this.watchOperation(started.name, { signal })) {
        last = op;
      }
    } catch (e) {
      if (!last.done) {
        await this.cancelOperation(started.name).catch(() => undefined);
      }
      throw e;
    }
    return ops.result(last);
  }

  /**
   * Starts a reflection (reflect's work) and answers its operation at once: follow it with
   * watchOperation or getOperation, stop it with cancelOperation. Retried: it always carries a
   * `requestId` (the client makes one when none is given), so a retry starts one reflection.
   */
  async startReflection(options: StartReflectionOptions = {}): Promise<Operation> {
    const resp = await this.unary(this.stub.startReflection.bind(this.stub),
      ops.startRequest(this.tenant, options), true);
    return ops.operation(resp.operation);
  }

  /** One of the tenant's operations as it is now (NOT_FOUND when it has none of that name). */
  async getOperation(name: string): Promise<Operation> {
    const resp = await this.unary(this.stub.getOperation.bind(this.stub),
      create(pb.GetOperationRequestSchema, { tenant: this.tenant, name }), true);
    return ops.operation(resp.operation);
  }

  /**
   * The operation now, then each time it changes, until it is done (the last one yielded). The
   * stream has no deadline; one the server ends first is opened again. Leaving the loop, or
   * aborting `signal` (which rejects with its reason), ends the stream.
   */
  async *watchOperation(
    name: string, options: { signal?: AbortSignal } = {},
  ): AsyncGenerator<Operation, void, undefined> {
    const req = create(pb.WatchOperationRequestSchema, { tenant: this.tenant, name });
    let seen: Operation | undefined;
    for (;;) {
      let last: Operation | undefined;
      for await (const r of this.serverStream(this.stub.watchOperation.bind(this.stub), req,
        options.signal)) {
        last = ops.operation(r.operation);
        if (!isDeepStrictEqual(last, seen)) { // a reopened stream starts with the state seen
          seen = last;
          yield last;
        }
      }
      if (last === undefined || last.done) {
        return;
      }
    }
  }

  /**
   * Asks an operation to stop: one not yet writing ends at once with the error CANCELLED, one
   * writing completes, one done stays as it was. Answers it after the attempt.
   */
  async cancelOperation(name: string): Promise<Operation> {
    const resp = await this.unary(this.stub.cancelOperation.bind(this.stub),
      create(pb.CancelOperationRequestSchema, { tenant: this.tenant, name }), true);
    return ops.operation(resp.operation);
  }

  /** One page of the tenant's operations, newest first (0 or absent: the server's 20). */
  async listOperations(options: PageOptions = {}): Promise<OperationPage> {
    const req = create(pb.ListOperationsRequestSchema, {
      tenant: this.tenant, pageSize: options.pageSize, pageToken: options.pageToken,
    });
    return ops.page(await this.unary(this.stub.listOperations.bind(this.stub), req, true));
  }

  /** One page of zone events and admin calls, oldest first. */
  async ledger(options: LedgerOptions = {}): Promise<LedgerPage> {
    const req = create(pb.LedgerRequestSchema, {
      tenant: this.tenant, since: cv.timestamp(options.since), memoryId: options.memoryId,
      pageSize: options.pageSize, pageToken: options.pageToken,
    });
    return cv.ledger(await this.unary(this.stub.ledger.bind(this.stub), req, true));
  }

  /** Admin: re-places the tenant's memories now (it also runs on the server's schedule). */
  async rebalance(options: RebalanceOptions = {}): Promise<RebalanceReport> {
    const req = create(pb.RebalanceRequestSchema, {
      tenant: this.tenant, dryRun: options.dryRun, full: options.full,
      noForget: options.forget === false,
    });
    return cv.rebalance(await this.unary(this.stub.rebalance.bind(this.stub), req, false));
  }

  /**
   * Admin, with a key for every tenant (`*`): the running server's settings (GetConfig) by name,
   * in the order docs/configuration.md lists them, each with its value, where that came from
   * when the server started and the environment variable that sets it. A secret's value never
   * leaves the server: `secret` is true and `value` "set" or "".
   */
  async serverConfig(): Promise<Record<string, ServerSetting>> {
    const resp = await this.unary(this.stub.getConfig.bind(this.stub),
      create(pb.GetConfigRequestSchema, {}), true);
    return cv.serverConfig(resp);
  }

  /**
   * The metadata every call sends (the API key's among it), as request headers: a fresh copy,
   * for calls made through `stub` (`{ headers: client.callMetadata() }`).
   */
  callMetadata(): Headers {
    return new Headers(this.baseMetadata);
  }

  /** Closes the connection; calls made afterwards fail. */
  close(): void {
    this.session.abort();
  }

  /** The items of every page from `token` on: `fetch` answers a page's items and next token. */
  private async *follow<T>(
    token: string, fetch: (pageToken: string) => Promise<[T[], string]>,
  ): AsyncGenerator<T, void, undefined> {
    for (;;) {
      const [items, next] = await fetch(token);
      yield* items;
      if (!next) {
        return;
      }
      if (next === token) {
        // The same token again would page forever.
        throw new Error("the server answered the page token it was sent as the next one");
      }
      token = next;
    }
  }

  /** A server stream's messages, without a deadline; cancelled when left or on `signal`. */
  private async *serverStream<Req, Res>(
    open: ServerStream<Req, Res>, req: Req, signal: AbortSignal | undefined,
  ): AsyncGenerator<Res, void, undefined> {
    signal?.throwIfAborted();
    const call = new AbortController();
    const abort = () => call.abort(signal?.reason);
    signal?.addEventListener("abort", abort, { once: true });
    try {
      yield* open(req, { headers: this.callMetadata(), signal: call.signal });
    } catch (e) {
      signal?.throwIfAborted();
      throw toCelestialError(e, this.tls);
    } finally {
      signal?.removeEventListener("abort", abort);
      call.abort(); // a stream left early is cancelled; one that ended is not touched
    }
  }

  private unary<Req, Res>(fn: Unary<Req, Res>, req: Req, retryable: boolean): Promise<Res> {
    return this.attempts(retryable, (options) => fn(req, options));
  }

  /** Runs a call, and again after a backoff while it fails in a way worth retrying. */
  private async attempts<T>(
    retryable: boolean, call: (options: CallOptions) => Promise<T>,
  ): Promise<T> {
    const deadline = this.timeoutMs > 0 ? Date.now() + this.timeoutMs : undefined;
    for (let attempt = 0; ; attempt++) {
      try {
        const headers = this.callMetadata();
        // What is left of the deadline: sent as grpc-timeout, and enforced here too.
        return await call(deadline === undefined ? { headers }
          : { headers, timeoutMs: Math.max(1, deadline - Date.now()) });
      } catch (e) {
        const err = toCelestialError(e, this.tls);
        const wait = retryable && err instanceof CelestialError ? this.backoff(err, attempt) : undefined;
        if (wait === undefined || (deadline !== undefined && Date.now() + wait >= deadline)) {
          throw err;
        }
        await sleep(wait);
      }
    }
  }

  /** How long to wait before retrying after `err`, or undefined not to retry. */
  private backoff(err: CelestialError, attempt: number): number | undefined {
    const worth = err.code === "UNAVAILABLE" ||
      (err.code === "RESOURCE_EXHAUSTED" && err.retryAfterMs !== undefined);
    if (!worth || attempt >= this.retry.maxRetries) {
      return undefined;
    }
    if (err.retryAfterMs !== undefined) {
      return err.retryAfterMs;
    }
    const cap = Math.min(this.retry.maxBackoffMs, this.retry.initialBackoffMs * 2 ** attempt);
    return cap / 2 + Math.random() * (cap / 2);
  }
}
