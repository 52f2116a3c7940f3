// Reflection as a long-running operation. Against a Connect gRPC server in this process
// (test/fake.ts) that plays made-up operations: the request id of a start, a watch the server
// ends early and that is opened again without repeating a state, a failed operation's error, a
// reflect aborted and its operation cancelled. Against live servers (skipped without their
// addresses): CELESTIAL_TEST_ADDRESS, without a model, refuses a start;
// CELESTIAL_TEST_MODEL_ADDRESS has a scripted model that stalls on any request about Dave until
// the operation is cancelled.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { CelestialClient, CelestialError, type Operation, OPERATION_STAGES, proto } from "../src/index";
import * as ops from "../src/operations";
import { type FakeServer, fakeServer, type Impl, ts } from "./fake";

const AT = new Date(Date.UTC(2024, 4, 7, 12, 0, 0));
const LATER = new Date(AT.getTime() + 1500);
const S = proto.OperationStage;

/** A generated Operation, as the server would send it. */
function pbOp(name: string, stage: proto.OperationStage,
              more: Partial<Omit<proto.Operation, "$typeName">> = {},
              meta: Partial<Omit<proto.OperationMetadata, "$typeName">> = {}): proto.Operation {
  return create(proto.OperationSchema, {
    name, done: stage === S.DONE, ...more,
    metadata: create(proto.OperationMetadataSchema, {
      kind: "reflection", tenant: "o", stage,
      request: create(proto.ReflectRequestSchema, { tenant: "o", dryRun: true }),
      createTime: ts(AT), updateTime: ts(AT), ...meta,
    }),
  });
}

/**
 * Polls `check` every 25 ms until it answers something other than undefined, and answers that.
 * What the server does meanwhile can take long on a loaded machine, so the bound is generous;
 * a condition that never holds still fails the test there.
 */
async function until<T>(what: string, check: () => T | undefined | Promise<T | undefined>,
                        ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const found = await check();
    if (found !== undefined) {
      return found;
    }
    if (Date.now() > deadline) {
      assert.fail(`${what}: not within ${ms / 1000} s`);
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** How an operation ended without a result. */
function opError(init: MessageInitShape<typeof proto.OperationErrorSchema>): proto.Operation["result"] {
  return { case: "error", value: create(proto.OperationErrorSchema, init) };
}

const RESULT = create(proto.ReflectResponseSchema, {
  insights: [{ id: "i", content: "Alice asks about ethics", entity: "name:alice", sourceIds: ["a"],
               created: true }],
  summaries: [], dryRun: true, memoriesRead: 6, modelCalls: 1, modelTokens: 100n,
});
const DONE = pbOp("operations/ok", S.DONE, { result: { case: "response", value: RESULT } },
  { modelCalls: 1, plannedModelCalls: 1, modelTokens: 100n, updateTime: ts(LATER), endTime: ts(LATER) });
const FAILED = pbOp("operations/budget", S.DONE, {
  result: opError({
    code: Code.ResourceExhausted, message: "the tenant's model budget is spent",
    reason: "MODEL_BUDGET", retryDelay: { seconds: 2n, nanos: 500_000_000 },
  }),
}, { endTime: ts(LATER) });

describe("a fake server of operations", () => {
  let server: FakeServer;
  let address = "";
  const seen = { starts: [] as proto.StartReflectionRequest[], watches: 0, cancels: [] as string[],
                 watchCancelled: 0, lists: [] as proto.ListOperationsRequest[] };

  before(async () => {
    const impl: Impl = {
      startReflection: (req) => {
        seen.starts.push(req);
        const name = `operations/${req.reflection?.entities[0] ?? "ok"}`;
        return { operation: pbOp(name, S.QUEUED) };
      },
      async *watchOperation(req, ctx) {
        seen.watches += 1;
        const name = req.name;
        ctx.signal.addEventListener("abort", () => {
          seen.watchCancelled += name === "operations/stall" ? 1 : 0;
        });
        const reading = pbOp(name, S.READING, {}, { memoriesRead: 6 });
        if (name === "operations/ok") {
          // The first stream ends before the operation is done; the second starts with the
          // state the first ended with.
          const msgs = seen.watches % 2 === 1 ? [pbOp(name, S.QUEUED), reading] : [reading, DONE];
          for (const operation of msgs) {
            yield { operation };
          }
        } else if (name === "operations/budget") {
          yield { operation: FAILED };
        } else {
          yield { operation: pbOp(name, S.ASKING_MODEL) }; // then stalls until cancelled
          await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve));
        }
      },
      getOperation: (req) => {
        if (req.name !== "operations/ok") {
          throw new ConnectError(`operation ${req.name}`, Code.NotFound);
        }
        return { operation: DONE };
      },
      cancelOperation: (req) => {
        seen.cancels.push(req.name);
        return { operation: pbOp(req.name, S.DONE, {
          result: opError({ code: Code.Canceled, message: "cancelled", reason: "CANCELLED" }),
        }, { cancelRequested: true, endTime: ts(LATER) }) };
      },
      listOperations: (req) => {
        seen.lists.push(req);
        return req.pageToken
          ? { operations: [FAILED], nextPageToken: "" }
          : { operations: [DONE], nextPageToken: "2" };
      },
    };
    server = await fakeServer(impl);
    address = server.address;
  });
  after(() => server.close());

  test("a start carries a request id: the caller's, or one the client makes", async () => {
    const c = new CelestialClient({ address, tenant: "o" });
    try {
      const op = await c.startReflection({ dryRun: false, window: 50, requestId: "once" });
      assert.deepEqual(seen.starts.at(-1), create(proto.StartReflectionRequestSchema, {
        reflection: { tenant: "o", dryRun: false, window: 50, entities: [] }, requestId: "once",
      }));
      assert.equal(op.name, "operations/ok");
      assert.equal(op.stage, "queued");
      assert.equal(op.done, false);
      await c.startReflection();
      await c.startReflection();
      const [a, b] = seen.starts.slice(-2);
      assert.equal(a.reflection?.dryRun, true, "a dry run unless dryRun: false");
      assert.match(a.requestId, /^[0-9a-f-]{36}$/);
      assert.notEqual(a.requestId, b.requestId);
    } finally {
      c.close();
    }
  });

  test("a watch the server ends early is opened again, without repeating a state", async () => {
    const c = new CelestialClient({ address, tenant: "o" });
    try {
      const before = seen.watches;
      const watched: Operation[] = [];
      for await (const op of c.watchOperation("operations/ok")) {
        watched.push(op);
      }
      assert.equal(seen.watches - before, 2);
      assert.deepEqual(watched.map((o) => o.stage), ["queued", "reading", "done"]);
      const last = watched[2];
      assert.equal(last.done, true);
      assert.deepEqual(last.result?.insights.map((i) => i.content), ["Alice asks about ethics"]);
      assert.deepEqual(last.endedAt, LATER);
      assert.equal(watched[0].endedAt, undefined);
      assert.equal(last.error, undefined);
      assert.deepEqual(await c.getOperation("operations/ok"), last);
    } finally {
      c.close();
    }
  });

  test("reflect starts and watches; a failed operation throws its error", async () => {
    const c = new CelestialClient({ address, tenant: "o" });
    try {
      const r = await c.reflect();
      assert.equal(r.modelTokens, 100);
      assert.equal(r.insights.length, 1);
      await assert.rejects(c.reflect({ entities: ["budget"] }), (err: unknown) =>
        err instanceof CelestialError && err.code === "RESOURCE_EXHAUSTED"
        && err.reason === "MODEL_BUDGET" && err.retryAfterMs === 2500
        && err.details === "the tenant's model budget is spent");
      assert.deepEqual(seen.cancels, [], "nothing to cancel: both ended");
    } finally {
      c.close();
    }
  });

  test("an aborted reflect cancels its operation and ends the stream", async () => {
    const c = new CelestialClient({ address, tenant: "o" });
    try {
      const ac = new AbortController();
      const watches = seen.watches;
      const done = c.reflect({ entities: ["stall"], signal: ac.signal });
      await until("reflect's watch", () => seen.watches > watches || undefined);
      ac.abort();
      await assert.rejects(done, (err: unknown) => err instanceof Error && err.name === "AbortError");
      assert.deepEqual(seen.cancels, ["operations/stall"]);
      // Leaving a watch early ends its stream too.
      for await (const op of c.watchOperation("operations/stall")) {
        assert.equal(op.stage, "asking_model");
        break;
      }
      // The server hears of a cancelled stream some time after the client left it.
      await until("both watches cancelled", () => seen.watchCancelled >= 2 || undefined);
      assert.equal(seen.watchCancelled, 2);
      await assert.rejects(c.reflect({ signal: AbortSignal.abort() }), { name: "AbortError" });
    } finally {
      c.close();
    }
  });

  test("get, cancel and a page of operations", async () => {
    const c = new CelestialClient({ address, tenant: "o" });
    try {
      await assert.rejects(c.getOperation("operations/none"), (err: unknown) =>
        err instanceof CelestialError && err.code === "NOT_FOUND");
      const cancelled = await c.cancelOperation("operations/x");
      assert.equal(cancelled.done, true);
      assert.equal(cancelled.cancelRequested, true);
      assert.deepEqual(cancelled.error, { code: "CANCELLED", reason: "CANCELLED", message: "cancelled" });
      const first = await c.listOperations({ pageSize: 1 });
      assert.deepEqual(first.operations.map((o) => o.name), ["operations/ok"]);
      assert.equal(first.nextPageToken, "2");
      const second = await c.listOperations({ pageSize: 1, pageToken: first.nextPageToken });
      assert.deepEqual(second.operations[0].error,
        { code: "RESOURCE_EXHAUSTED", reason: "MODEL_BUDGET",
          message: "the tenant's model budget is spent", retryAfterMs: 2500 });
      assert.equal(second.nextPageToken, "");
      assert.deepEqual(seen.lists.map((r) => [r.tenant, r.pageSize, r.pageToken]),
        [["o", 1, ""], ["o", 1, "2"]]);
    } finally {
      c.close();
    }
  });
});

test("an operation converts, and JSON works", () => {
  const op = ops.operation(DONE);
  assert.deepEqual(op, {
    name: "operations/ok", kind: "reflection", done: true, stage: "done", dryRun: true,
    memoriesRead: 0, modelCalls: 1, plannedModelCalls: 1, modelTokens: 100, createdAt: AT,
    updatedAt: LATER, endedAt: LATER, cancelRequested: false, automatic: false,
    result: { insights: [{ id: "i", content: "Alice asks about ethics", entity: "name:alice",
                           sourceIds: ["a"], created: true }],
              summaries: [], dryRun: true, memoriesRead: 6, modelCalls: 1, modelTokens: 100 },
  });
  assert.equal(JSON.parse(JSON.stringify(op)).endedAt, LATER.toISOString());
  assert.deepEqual(OPERATION_STAGES, ["queued", "reading", "asking_model", "writing", "done"]);
  assert.throws(() => ops.result(ops.operation(pbOp("operations/q", S.QUEUED))),
    (err: unknown) => err instanceof CelestialError && /is not done/.test(err.details));
});

const ADDRESS = process.env.CELESTIAL_TEST_ADDRESS;
const MODEL_ADDRESS = process.env.CELESTIAL_TEST_MODEL_ADDRESS;
const RUN = `${process.pid}-${Date.now()}`;

describe("a live server without a model", { skip: ADDRESS ? false : "CELESTIAL_TEST_ADDRESS is not set" }, () => {
  test("a start is refused, an unknown operation is not found, the list is empty", async () => {
    const c = new CelestialClient({ address: ADDRESS!, tenant: `ts-ops-${RUN}`, timeoutMs: 20_000 });
    try {
      await assert.rejects(c.startReflection(), (err: unknown) =>
        err instanceof CelestialError && err.code === "FAILED_PRECONDITION");
      await assert.rejects(c.reflect({ dryRun: false }), (err: unknown) =>
        err instanceof CelestialError && err.code === "FAILED_PRECONDITION");
      await assert.rejects(c.getOperation("operations/00000000-0000-4000-8000-000000000000"),
        (err: unknown) => err instanceof CelestialError && err.code === "NOT_FOUND");
      assert.deepEqual(await c.listOperations(), { operations: [], nextPageToken: "" });
    } finally {
      c.close();
    }
  });
});

const STORIES = [
  "Alice asked about the ethics of lying", "Alice asked whether zoos are ethical",
  "Alice read a book on moral philosophy", "Bob went hiking near Oslo",
  "Bob bought new hiking boots", "Dave fixed the fence", "Dave painted the fence",
];

describe("a live server with a scripted model", {
  skip: MODEL_ADDRESS ? false : "CELESTIAL_TEST_MODEL_ADDRESS is not set",
}, () => {
  let c: CelestialClient;
  before(async () => {
    c = new CelestialClient({ address: MODEL_ADDRESS!, tenant: `ts-model-${RUN}`, timeoutMs: 20_000 });
    await c.storeBatch(STORIES);
  });
  after(() => c?.close());

  test("reflect answers a dry run; a start is watched to its result", async () => {
    const entities = ["name:alice", "name:bob"];
    const dry = await c.reflect({ entities });
    assert.equal(dry.dryRun, true);
    assert.deepEqual(dry.summaries.map((s) => s.entity), entities);
    assert.equal(dry.modelCalls, 1);

    const started = await c.startReflection({ dryRun: false, entities });
    assert.match(started.name, /^operations\//);
    assert.equal(started.kind, "reflection");
    assert.equal(started.dryRun, false);
    const watched: Operation[] = [];
    for await (const op of c.watchOperation(started.name)) {
      watched.push(op);
    }
    const stages = watched.map((o) => OPERATION_STAGES.indexOf(o.stage));
    assert.deepEqual(stages, [...stages].sort(), "stages only move on");
    const last = watched.at(-1)!;
    assert.equal(last.done, true);
    assert.equal(last.error, undefined);
    assert.ok(last.endedAt instanceof Date);
    assert.deepEqual(last.result?.insights.map((i) => i.created), [true, true]);
    assert.deepEqual(await c.getOperation(started.name), last);
  });

  // The server gives up on the stalled model call after its model timeout (5 s here) and ends
  // the operation UNAVAILABLE by itself; on a loaded machine that can come before the cancel
  // does. Such an attempt shows nothing about cancelling, so a new reflection is started; the
  // last attempt is asserted whatever happened, so a cancel that never lands still fails.
  const ATTEMPTS = 3;
  const ranOut = (op: Operation) =>
    op.done && !op.cancelRequested && op.error?.code === "UNAVAILABLE";

  test("a stalled reflection is cancelled; an aborted reflect cancels its own", async () => {
    for (let attempt = 1; ; attempt++) {
      const started = await c.startReflection({ dryRun: false, entities: ["name:dave"] });
      // Polled rather than watched: a watch can skip a state that came while it opened, and
      // then says nothing more until the operation is done.
      const asking = await until("the reflection asking the model", async () => {
        const op = await c.getOperation(started.name);
        return op.stage === "asking_model" || op.done ? op : undefined;
      });
      const cancelled = await c.cancelOperation(started.name);
      if (ranOut(cancelled) && attempt < ATTEMPTS) {
        continue;
      }
      assert.equal(asking.stage, "asking_model", "the model holds the call");
      assert.equal(cancelled.done, true);
      assert.equal(cancelled.cancelRequested, true);
      assert.equal(cancelled.result, undefined);
      assert.equal(cancelled.error?.code, "CANCELLED");
      assert.equal(cancelled.error?.reason, "CANCELLED");
      break;
    }

    for (let attempt = 1; ; attempt++) {
      const known = new Set((await c.listOperations({ pageSize: 100 })).operations.map((o) => o.name));
      const ac = new AbortController();
      // Settled into what it rejected with, so that a rejection before the abort is not unhandled.
      const reflecting = c.reflect({ dryRun: false, entities: ["name:dave"], signal: ac.signal })
        .then(() => undefined, (e: unknown) => e);
      const reached = await until("the reflection asking the model", async () => {
        const { operations } = await c.listOperations({ pageSize: 100 });
        return operations.find((o) => !known.has(o.name) && (o.stage === "asking_model" || o.done));
      });
      ac.abort();
      const err = await reflecting;
      // reflect cancels before it rejects: the operation shows it at once.
      const after = await c.getOperation(reached.name);
      if (ranOut(after) && attempt < ATTEMPTS) {
        continue;
      }
      assert.equal(reached.stage, "asking_model", "the reflection reached the model");
      assert.ok(err instanceof Error && err.name === "AbortError", `reflect rejected with ${err}`);
      assert.equal(after.done, true);
      assert.equal(after.cancelRequested, true);
      assert.equal(after.error?.code, "CANCELLED");
      break;
    }
  });
});
