// Without the real server: error details decoded from a hand-made status, retries against a
// Connect gRPC server in this process that fails on purpose (test/fake.ts), the conversion of
// generated messages, and the graph methods against a fake server that answers made-up pages.
import assert from "node:assert/strict";
import * as net from "node:net";
import { after, before, describe, test } from "node:test";
import { create, fromBinary, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import * as cv from "../src/convert";
import {
  CelestialClient, CelestialError, proto, TLS_EXPECTED_HINT, TLS_UNEXPECTED_HINT, toCelestialError,
} from "../src/index";
import { BadRequestSchema, ErrorInfoSchema, RetryInfoSchema } from "../src/gen/google/rpc/error_details_pb.js";
import { type FakeServer, fakeServer, type Impl, ts } from "./fake";

/** The error a server fails with: its details go out in grpc-status-details-bin. */
function unavailable(retryMs: number): ConnectError {
  return new ConnectError("the store is down", Code.Unavailable, undefined, [
    { desc: ErrorInfoSchema, value: { reason: "UNAVAILABLE", domain: "celestial-memory" } },
    { desc: RetryInfoSchema, value: { retryDelay: { seconds: 0n, nanos: retryMs * 1e6 } } },
  ]);
}

describe("a fake server that fails on purpose", () => {
  let server: FakeServer;
  const calls: Record<string, number> = {};
  let address = "";
  const count = (name: string) => {
    calls[name] = (calls[name] ?? 0) + 1;
    return calls[name];
  };
  const slow: { timeoutMs?: number; headers?: Headers } = {};
  const stats = { zones: [], total: 0n, embeddingModel: "fake", dimension: 3, backend: "", storageBackend: 1, archived: 0n };

  before(async () => {
    const impl: Impl = {
      // Unavailable twice with a 50 ms RetryInfo, then answers.
      stats: () => {
        if (count("stats") <= 2) {
          throw unavailable(50);
        }
        return stats;
      },
      store: () => {
        count("store");
        throw unavailable(10);
      },
      recall: () => {
        count("recall");
        throw unavailable(10);
      },
      // Answers long after the client's deadline (or once the call is cancelled), having noted
      // the grpc-timeout it was sent and the metadata. Far beyond the deadline, so that how long
      // the client took tells giving up from waiting even on a loaded machine.
      list: async (_req, ctx) => {
        slow.timeoutMs = ctx.timeoutMs();
        slow.headers = ctx.requestHeader;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 30_000);
          ctx.signal.addEventListener("abort", () => {
            clearTimeout(timer);
            resolve();
          });
        });
        return { memories: [], nextPageToken: "" };
      },
      get: (req) => {
        throw new ConnectError(`id: ${req.id} is not a UUID`, Code.InvalidArgument, undefined, [
          { desc: ErrorInfoSchema, value: { reason: "INVALID_ARGUMENT", domain: "celestial-memory" } },
          { desc: BadRequestSchema, value: { fieldViolations: [{ field: "id", description: "is not a UUID" }] } },
        ]);
      },
    };
    server = await fakeServer(impl);
    address = server.address;
  });
  after(() => server.close());

  test("a read is retried after the RetryInfo delay", async () => {
    const c = new CelestialClient({ address, retries: 2 });
    try {
      const started = Date.now();
      const s = await c.stats();
      assert.equal(calls.stats, 3);
      assert.ok(Date.now() - started >= 95, "waited the two 50 ms delays");
      assert.equal(s.backend, "edge");
    } finally {
      c.close();
    }
  });

  test("a Store without id or requestId is not retried; with a requestId it is", async () => {
    const c = new CelestialClient({ address, retries: 3 });
    try {
      calls.store = 0;
      const err = await c.store("x").then(() => undefined, (e) => e);
      assert.ok(err instanceof CelestialError);
      assert.equal(err.code, "UNAVAILABLE");
      assert.equal(err.retryAfterMs, 10);
      assert.equal(err.reason, "UNAVAILABLE");
      assert.equal(calls.store, 1);
      calls.store = 0;
      await assert.rejects(c.store("x", { requestId: "r-1" }), CelestialError);
      assert.equal(calls.store, 4);
    } finally {
      c.close();
    }
  });

  test("a reinforcing recall is not retried; a read-only one is", async () => {
    const c = new CelestialClient({ address, retries: 1 });
    try {
      calls.recall = 0;
      await assert.rejects(c.recall("q"), CelestialError);
      assert.equal(calls.recall, 1);
      calls.recall = 0;
      await assert.rejects(c.recall("q", { reinforce: false }), CelestialError);
      assert.equal(calls.recall, 2);
    } finally {
      c.close();
    }
  });

  test("retries stop at the deadline", async () => {
    // Counted in calls, not timed: the 10 ms RetryInfo between them lets at most about 200 fit in
    // the 2 s deadline (a loaded machine makes fewer), while the 1000 retries allowed would take
    // 10 s at least. A 2 s deadline leaves a loaded machine time for a second call.
    const c = new CelestialClient({ address, retries: { maxRetries: 1000 }, timeoutMs: 2000 });
    try {
      // Connected first, by a call that is not retried: only the recall's retries count.
      await assert.rejects(c.get("nope"), CelestialError);
      calls.recall = 0;
      await assert.rejects(c.recall("q", { reinforce: false }), CelestialError);
      assert.ok(calls.recall > 1 && calls.recall < 400, `${calls.recall} calls`);
    } finally {
      c.close();
    }
  });

  test("BadRequest and ErrorInfo are read into the error", async () => {
    const c = new CelestialClient({ address });
    try {
      const err = await c.get("nope").then(() => undefined, (e) => e);
      assert.ok(err instanceof CelestialError);
      assert.equal(err.code, "INVALID_ARGUMENT");
      assert.equal(err.grpcCode, Code.InvalidArgument);
      assert.equal(err.field, "id");
      assert.deepEqual(err.violations, [{ field: "id", description: "is not a UUID" }]);
      assert.equal(err.reason, "INVALID_ARGUMENT");
      assert.equal(err.domain, "celestial-memory");
      assert.equal(err.details, "id: nope is not a UUID");
      assert.equal(err.message, "INVALID_ARGUMENT: id: nope is not a UUID");
      assert.ok(err.stack?.startsWith("CelestialError: INVALID_ARGUMENT"), err.stack);
    } finally {
      c.close();
    }
  });

  test("a call past its deadline is DEADLINE_EXCEEDED; the deadline and metadata are sent", async () => {
    const c = new CelestialClient({
      address, timeoutMs: 300, apiKey: "cm_secret", metadata: { "x-trace": "t-1" },
    });
    try {
      const started = Date.now();
      await assert.rejects(c.list(), (err: unknown) =>
        err instanceof CelestialError && err.code === "DEADLINE_EXCEEDED");
      assert.ok(Date.now() - started < 10_000, "the client gave up at its deadline");
      assert.ok(slow.timeoutMs !== undefined && slow.timeoutMs > 0 && slow.timeoutMs <= 300,
        `grpc-timeout: ${slow.timeoutMs}`);
      assert.equal(slow.headers?.get("authorization"), "Bearer cm_secret");
      assert.equal(slow.headers?.get("x-trace"), "t-1");
      assert.equal(c.callMetadata().get("authorization"), "Bearer cm_secret");
    } finally {
      c.close();
    }
  });

  test("a method the server lacks is UNIMPLEMENTED, with no details", async () => {
    const c = new CelestialClient({ address });
    try {
      const err = await c.delete("x").then(() => undefined, (e) => e);
      assert.ok(err instanceof CelestialError);
      assert.equal(err.code, "UNIMPLEMENTED");
      assert.equal(err.reason, undefined);
      assert.deepEqual(err.violations, []);
    } finally {
      c.close();
    }
  });
});

test("no server at all is UNAVAILABLE, after the retries", async () => {
  const c = new CelestialClient({ address: "127.0.0.1:1", retries: { maxRetries: 1, initialBackoffMs: 10 } });
  try {
    await assert.rejects(c.stats(), (err: unknown) =>
      err instanceof CelestialError && err.code === "UNAVAILABLE" && err.grpcCode === 14);
  } finally {
    c.close();
  }
});

/** A TCP server that answers every connection's first bytes as `answer` says, then hangs up. */
async function rawServer(answer: (socket: net.Socket) => void): Promise<{ port: number; close(): void }> {
  const server = net.createServer((socket) => socket.once("data", () => answer(socket)));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { port: (server.address() as net.AddressInfo).port, close: () => server.close() };
}

test("a TLS mismatch is named in the error of a failed connection", async () => {
  const noRetry = { maxRetries: 0 };
  // A TLS server hangs up on a plaintext client's HTTP/2 preface.
  const tlsPort = await rawServer((socket) => socket.destroy());
  // A plaintext server answers a TLS hello with bytes that are no TLS record.
  const plainPort = await rawServer((socket) => socket.end("HTTP/1.1 400 Bad Request\r\n\r\n"));
  const plain = new CelestialClient({ address: `127.0.0.1:${tlsPort.port}`, retries: noRetry });
  const tls = new CelestialClient({ address: `127.0.0.1:${plainPort.port}`, tls: true, retries: noRetry });
  const refused = new CelestialClient({ address: "127.0.0.1:1", retries: noRetry });
  const details = async (c: CelestialClient) => {
    const err = await c.stats().then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof CelestialError && err.code === "UNAVAILABLE", String(err));
    return err.details;
  };
  try {
    assert.ok((await details(plain)).endsWith(`(${TLS_EXPECTED_HINT})`));
    assert.ok((await details(tls)).endsWith(`(${TLS_UNEXPECTED_HINT})`));
    assert.ok(!(await details(refused)).includes("TLS")); // nothing listens: no hint
  } finally {
    [plain, tls, refused].forEach((c) => c.close());
    tlsPort.close();
    plainPort.close();
  }
});

test("TLS options refuse a path given for PEM text", () => {
  assert.throws(() => new CelestialClient({ address: "localhost:1", tls: { ca: "/etc/ca.pem" } }),
    /PEM text or a Buffer/);
});

test("details that do not decode leave the status as it is", () => {
  const bad = new ConnectError("boom", Code.Internal, { "grpc-status": "13" });
  bad.details = [{ type: "google.rpc.ErrorInfo", value: new Uint8Array([0xff, 0xff, 0xff]) }];
  const err = toCelestialError(bad);
  assert.ok(err instanceof CelestialError);
  assert.equal(err.code, "INTERNAL");
  assert.equal(err.details, "boom");
  assert.equal(err.reason, undefined);
  const plain = new Error("not a call's");
  assert.equal(toCelestialError(plain), plain);
});

const AT = new Date(Date.UTC(2024, 4, 7, 12, 0, 0));
const A = "00000000-0000-4000-8000-00000000000a";
const B = "00000000-0000-4000-8000-00000000000b";
const C = "00000000-0000-4000-8000-00000000000c";

const TS_AT = ts(AT);
type Init<T extends Parameters<typeof create>[0]> = MessageInitShape<T>;

/** A relation as the client answers it. */
function rel(id: string, relation: string, weight: number, madeBy: string, outgoing: boolean) {
  return { id, relation, weight, madeBy, createdAt: AT, outgoing };
}

/** The same relation as the server would send it. */
function pbRel(id: string, relation: string, weight: number, madeBy: string, outgoing: boolean) {
  return create(proto.RelationSchema, { id, relation, weight, madeBy, createdAt: TS_AT, outgoing });
}

/** A generated Memory, as the server would send it. */
function pbMemory(id: string, more: Init<typeof proto.MemorySchema> = {}): proto.Memory {
  return create(proto.MemorySchema, {
    id, tenant: "t", content: `memory ${id}`, zone: proto.Zone.OUTER, createdAt: TS_AT,
    lastRecalledAt: TS_AT, ...more,
  });
}

describe("conversion of reflection and resolutions", () => {
  test("a memory's summary and triples, a profile's summary, a reflection", () => {
    const m = cv.memory(pbMemory(A, {
      summary: "Alice works at Acme.",
      triples: [{ subject: "Alice", relation: "works_at", object: "Acme" }],
    }));
    assert.equal(m.summary, "Alice works at Acme.");
    assert.deepEqual(m.triples, [["Alice", "works_at", "Acme"]]);
    assert.deepEqual(cv.memory(pbMemory(B)).triples, []);
    const wire = fromBinary(proto.ReflectResponseSchema, toBinary(proto.ReflectResponseSchema, 
      create(proto.ReflectResponseSchema, {
        insights: [{ id: A, content: "Alice asks about ethics", entity: "name:alice",
                     sourceIds: [B, C], created: true }],
        summaries: [{ entity: "name:alice", summary: "Alice works at Acme.", id: C,
                      sourceIds: [B] }],
        dryRun: false, memoriesRead: 12, modelCalls: 1, modelTokens: 345n,
      })));
    assert.deepEqual(cv.reflection(wire), {
      insights: [{ id: A, content: "Alice asks about ethics", entity: "name:alice",
                   sourceIds: [B, C], created: true }],
      summaries: [{ entity: "name:alice", summary: "Alice works at Acme.", id: C,
                    sourceIds: [B] }],
      dryRun: false, memoriesRead: 12, modelCalls: 1, modelTokens: 345,
    });
  });
});

describe("conversion of the graph fields", () => {
  test("a memory's relations and entities", () => {
    const m = cv.memory(pbMemory(A, {
      relations: [
        pbRel(B, "follows", 0.5, "caller", true),
        { ...pbRel(C, "follows", 1, "session", false), createdAt: undefined },
      ],
      entities: ["name:caroline", "date:2023-05-07"],
    }));
    assert.deepEqual(m.relations, [
      { id: B, relation: "follows", weight: 0.5, madeBy: "caller", createdAt: AT, outgoing: true },
      { id: C, relation: "follows", weight: 1, madeBy: "session", createdAt: new Date(0),
        outgoing: false },
    ]);
    assert.ok(m.relations[0].createdAt instanceof Date);
    assert.deepEqual(m.entities, ["name:caroline", "date:2023-05-07"]);
    // Without any: empty lists, never undefined.
    const bare = cv.memory(pbMemory(B));
    assert.deepEqual(bare.relations, []);
    assert.deepEqual(bare.entities, []);
    assert.deepEqual(bare.triples, []);
    assert.equal(bare.understanding, "");
  });

  test("a memory's triples and the model's reading", () => {
    const m = cv.memory(pbMemory(A, {
      triples: [{ subject: "Alice", relation: "works_at", object: "Acme" }],
      understanding: "done",
    }));
    assert.deepEqual(m.triples, [["Alice", "works_at", "Acme"]]);
    assert.equal(m.understanding, "done");
    // Through the wire and back, as a response carries them.
    const wire = fromBinary(proto.MemorySchema, toBinary(proto.MemorySchema, pbMemory(A, {
      relations: [pbRel(B, "about", 0.25, "repeat", true)],
      entities: ["title:dune"],
    })));
    assert.deepEqual(cv.memory(wire).relations, [rel(B, "about", 0.25, "repeat", true)]);
    assert.deepEqual(cv.memory(wire).entities, ["title:dune"]);
  });

  test("a recall result's via, only when expansion reached it", () => {
    const [seed, lifted] = cv.recallResults(create(proto.RecallResponseSchema, {
      results: [
        { memory: pbMemory(A), foundIn: proto.Zone.CORE, relevance: 0.9 },
        {
          memory: pbMemory(B), foundIn: proto.Zone.OUTER, relevance: 0.4,
          via: { fromId: A, relation: "follows", weight: 0.8, hops: 2 },
        },
      ],
    }));
    assert.equal(seed.via, undefined);
    assert.ok(!("via" in seed), "no via key on a result the search found itself");
    assert.deepEqual(lifted.via, { fromId: A, relation: "follows", weight: 0.8, hops: 2 });
    assert.equal(lifted.foundIn, "outer");
  });

  test("a recall's expand (0 is sent, absent is not) and entitiesAny", () => {
    const sent = (o: Parameters<typeof cv.recallRequest>[2]) => fromBinary(proto.RecallRequestSchema,
      toBinary(proto.RecallRequestSchema, cv.recallRequest("t", "q", o)));
    assert.equal(sent({}).expand, undefined);
    assert.equal(sent({ expand: 0 }).expand, 0);
    assert.equal(sent({ expand: 2 }).expand, 2);
    assert.deepEqual(sent({ entitiesAny: ["name:caroline"] }).filter?.entitiesAny,
      ["name:caroline"]);
    assert.deepEqual(sent({}).filter?.entitiesAny, []);
    assert.deepEqual(cv.filter({ entitiesAny: ["date:2023-05-07"] }).entitiesAny,
      ["date:2023-05-07"]);
  });

  test("related memories with their paths", () => {
    const out = cv.related(create(proto.RelatedResponseSchema, {
      memories: [{
        memory: pbMemory(C),
        path: [
          { fromId: A, toId: B, relation: "follows", weight: 1 },
          { fromId: C, toId: B, relation: "about", weight: 0.5 },
        ],
      }],
      nextPageToken: "",
    }));
    assert.equal(out.length, 1);
    assert.equal(out[0].memory.id, C);
    assert.equal(out[0].memory.zone, "outer");
    assert.deepEqual(out[0].path, [
      { fromId: A, toId: B, relation: "follows", weight: 1 },
      { fromId: C, toId: B, relation: "about", weight: 0.5 },
    ]);
  });

  test("an entity and its profile", () => {
    const e = { id: "name:caroline", kind: "name", key: "caroline", mentions: 3 };
    assert.deepEqual(cv.entity(create(proto.EntitySchema, { ...e, mentions: 3n })), e);
    const later = new Date(AT.getTime() + 86_400_000);
    const p = cv.entityProfile(create(proto.EntityProfileSchema, {
      entity: { ...e, mentions: 3n }, firstSeen: TS_AT, lastSeen: ts(later),
      mostRecalled: [pbMemory(A), pbMemory(B)],
    }));
    assert.deepEqual(p.entity, e);
    assert.deepEqual(p.firstSeen, AT);
    assert.deepEqual(p.lastSeen, later);
    assert.deepEqual(p.mostRecalled.map((m) => m.id), [A, B]);
    assert.throws(() => cv.entityProfile(undefined), /without the entity's profile/);
  });
});

describe("a fake server of the graph methods", () => {
  let server: FakeServer;
  let address = "";
  const seen: {
    relate?: proto.RelateRequest; unrelate?: proto.UnrelateRequest; recall?: proto.RecallRequest;
    related: proto.RelatedRequest[]; entities: proto.EntitiesRequest[];
  } = { related: [], entities: [] };
  // Related answers C, B and A over three pages; Entities two entities over two pages.
  const pbEntity = (e: (typeof names)[number]) => ({ ...e, mentions: BigInt(e.mentions) });
  const walk = [C, B, A];
  const names = [
    { id: "name:caroline", kind: "name", key: "caroline", mentions: 2 },
    { id: "date:2023-05-07", kind: "date", key: "2023-05-07", mentions: 1 },
  ];

  before(async () => {
    const impl: Impl = {
      relate: (req) => {
        seen.relate = req;
        const r = req;
        const relation = pbRel(r.toId, r.relation, r.weight ?? 1, "caller", true);
        return ({ created: true, relation });
      },
      unrelate: (req) => {
        seen.unrelate = req;
        return ({ removed: 2 });
      },
      related: (req) => {
        seen.related.push(req);
        if (req.id === B) {
          // A server that answers the token it was sent would page forever.
          return ({ memories: [], nextPageToken: req.pageToken || "same" });
        }
        const i = Number(req.pageToken || "0");
        return ({
          memories: [{
            memory: pbMemory(walk[i]),
            path: [{ fromId: A, toId: walk[i], relation: "follows", weight: 1 }],
          }],
          nextPageToken: i + 1 < walk.length ? String(i + 1) : "",
        });
      },
      entities: (req) => {
        seen.entities.push(req);
        if (req.entity) {
          if (req.entity !== names[0].id) {
            throw new ConnectError(`entity ${req.entity}`, Code.NotFound);
          }
          return ({
            entities: [], nextPageToken: "",
            profile: { entity: pbEntity(names[0]), firstSeen: TS_AT, lastSeen: TS_AT, mostRecalled: [pbMemory(A)],
                       summary: "", summaryId: "" },
          });
        }
        const i = Number(req.pageToken || "0");
        return ({ entities: [pbEntity(names[i])], nextPageToken: i === 0 ? "1" : "", profile: undefined });
      },
      recall: (req) => {
        seen.recall = req;
        return (create(proto.RecallResponseSchema, {
          results: [
            { memory: pbMemory(A), foundIn: proto.Zone.CORE, relevance: 0.9 },
            {
              memory: pbMemory(B), foundIn: proto.Zone.BELT, relevance: 0.3,
              via: { fromId: A, relation: "follows", weight: 0.5, hops: 1 },
            },
          ],
        }));
      },
    };
    server = await fakeServer(impl);
    address = server.address;
  });
  after(() => server.close());

  test("relate sends its arguments and answers the relation", async () => {
    const c = new CelestialClient({ address, tenant: "g" });
    try {
      const r = await c.relate(A, B, "follows", 0.25);
      assert.deepEqual(seen.relate, create(proto.RelateRequestSchema,
        { tenant: "g", fromId: A, toId: B, relation: "follows", weight: 0.25 }));
      assert.deepEqual(r, { created: true, relation: rel(B, "follows", 0.25, "caller", true) });
      await c.relate(A, B, "about");
      assert.equal(seen.relate?.weight, undefined, "no weight: the server's 1");
    } finally {
      c.close();
    }
  });

  test("unrelate answers how many were removed; no relation is every one", async () => {
    const c = new CelestialClient({ address, tenant: "g" });
    try {
      assert.equal(await c.unrelate(A, B), 2);
      assert.deepEqual(seen.unrelate,
        create(proto.UnrelateRequestSchema, { tenant: "g", fromId: A, toId: B, relation: "" }));
      await c.unrelate(A, B, "follows");
      assert.equal(seen.unrelate?.relation, "follows");
    } finally {
      c.close();
    }
  });

  test("related follows the page tokens to the end", async () => {
    const c = new CelestialClient({ address, tenant: "g" });
    try {
      seen.related = [];
      const out = await c.related(A, { depth: 2, relations: ["follows"], pageSize: 1 });
      assert.deepEqual(out.map((r) => r.memory.id), walk);
      assert.deepEqual(out[0].path, [{ fromId: A, toId: C, relation: "follows", weight: 1 }]);
      assert.deepEqual(seen.related.map((r) => r.pageToken), ["", "1", "2"]);
      assert.deepEqual(seen.related[0], create(proto.RelatedRequestSchema, {
        tenant: "g", id: A, depth: 2, relations: ["follows"], pageSize: 1, pageToken: "",
      }));
      await assert.rejects(c.related(B), /page token it was sent/);
    } finally {
      c.close();
    }
  });

  test("entities follows the page tokens; entity answers a profile or NOT_FOUND", async () => {
    const c = new CelestialClient({ address, tenant: "g" });
    try {
      seen.entities = [];
      assert.deepEqual(await c.entities({ pageSize: 1 }), names);
      assert.deepEqual(seen.entities.map((r) => [r.pageSize, r.pageToken]), [[1, ""], [1, "1"]]);
      const p = await c.entity("name:caroline");
      assert.deepEqual(p.entity, names[0]);
      assert.deepEqual(p.mostRecalled.map((m) => m.id), [A]);
      assert.equal(seen.entities.at(-1)?.entity, "name:caroline");
      await assert.rejects(c.entity("name:nobody"), (err: unknown) =>
        err instanceof CelestialError && err.code === "NOT_FOUND");
    } finally {
      c.close();
    }
  });

  test("recall sends expand and entitiesAny, and answers via", async () => {
    const c = new CelestialClient({ address, tenant: "g" });
    try {
      const results = await c.recall("q", { expand: 0, entitiesAny: ["name:caroline"] });
      assert.equal(seen.recall?.expand, 0);
      assert.deepEqual(seen.recall?.filter?.entitiesAny, ["name:caroline"]);
      assert.equal(results[0].via, undefined);
      assert.deepEqual(results[1].via, { fromId: A, relation: "follows", weight: 0.5, hops: 1 });
      await c.recall("q");
      assert.equal(seen.recall?.expand, undefined, "absent: the server's default");
    } finally {
      c.close();
    }
  });
});

describe("conversion of the next move", () => {
  test("a zone and a time, the archive, or nothing scheduled", () => {
    const wire = (more: Init<typeof proto.MemorySchema>) =>
      cv.memory(fromBinary(proto.MemorySchema, toBinary(proto.MemorySchema, pbMemory(A, more))));
    assert.deepEqual(wire({ nextMove: { zone: proto.Zone.BELT, at: TS_AT, archive: false } })
      .nextMove, { zone: "belt", at: AT, archive: false });
    assert.deepEqual(wire({ nextMove: { zone: proto.Zone.UNSPECIFIED, at: TS_AT, archive: true } })
      .nextMove, { at: AT, archive: true });
    assert.equal(wire({}).nextMove, undefined);
  });
});

describe("types, protection and feedback against a fake server", () => {
  let server: FakeServer;
  let address = "";
  const seen: {
    store?: proto.StoreRequest; recall?: proto.RecallRequest; feedback: proto.FeedbackRequest[];
  } = { feedback: [] };

  before(async () => {
    const impl: Impl = {
      store: (req) => {
        seen.store = req;
        const r = req;
        return ({ created: true, mergedInto: "", memory: pbMemory(A, {
          memoryType: r.memoryType || proto.MemoryType.EPISODE, immutable: r.immutable,
        }) });
      },
      recall: (req) => {
        seen.recall = req;
        return (create(proto.RecallResponseSchema, { results: [] }));
      },
      feedback: (req) => {
        seen.feedback.push(req);
        if (seen.feedback.length === 3) {  // once unavailable: a vote is never sent twice
          throw unavailable(10);
        }
        const helpful = req.verdict === proto.Verdict.HELPFUL;
        return ({ importanceBefore: 0.5, memory: pbMemory(req.id, {
          importance: helpful ? 0.6 : 0.4,
        }) });
      },
    };
    server = await fakeServer(impl);
    address = server.address;
  });
  after(() => server.close());

  test("store sends the type and the flag, and reads them back", async () => {
    const c = new CelestialClient({ address, tenant: "u" });
    try {
      const { memory } = await c.store("Alice prefers tea", { memoryType: "preference", immutable: true });
      assert.equal(seen.store?.memoryType, proto.MemoryType.PREFERENCE);
      assert.equal(seen.store?.immutable, true);
      assert.equal(memory.memoryType, "preference");
      assert.equal(memory.immutable, true);
      const plain = await c.store("we met at noon");
      assert.equal(seen.store?.memoryType, proto.MemoryType.UNSPECIFIED);
      assert.equal(plain.memory.memoryType, "episode");
      assert.throws(() => cv.memoryTypeToPb("rumour" as never), /unknown memory type/);
    } finally {
      c.close();
    }
  });

  test("recall sends memoryTypes", async () => {
    const c = new CelestialClient({ address, tenant: "u" });
    try {
      await c.recall("q", { memoryTypes: ["fact", "episode"] });
      assert.deepEqual(seen.recall?.filter?.memoryTypes,
        [proto.MemoryType.FACT, proto.MemoryType.EPISODE]);
    } finally {
      c.close();
    }
  });

  test("feedback sends the verdict, answers the memory, and is never retried", async () => {
    const c = new CelestialClient({ address, tenant: "u" });
    try {
      assert.equal((await c.feedback(A, true)).importance, 0.6);
      assert.equal((await c.feedback(B, false)).importance, 0.4);
      assert.deepEqual(seen.feedback.map((r) => [r.tenant, r.id, r.verdict]), [
        ["u", A, proto.Verdict.HELPFUL], ["u", B, proto.Verdict.NOT_HELPFUL]]);
      await assert.rejects(c.feedback(C, true), (err: unknown) =>
        err instanceof CelestialError && err.code === "UNAVAILABLE");
      assert.equal(seen.feedback.length, 3, "one attempt");
    } finally {
      c.close();
    }
  });

  test("feedback events and unknown types convert", () => {
    const page = cv.ledger(create(proto.LedgerResponseSchema, { events: [{
      id: "e", memoryId: A, fromZone: proto.Zone.BELT, toZone: proto.Zone.OUTER,
      kind: proto.ZoneEventKind.FEEDBACK_NOT_HELPFUL, at: TS_AT,
    }] }));
    assert.equal(page.events[0].kind, "not_helpful");
    assert.equal(cv.memory(pbMemory(A, { memoryType: 42 as proto.MemoryType })).memoryType, "episode");
  });
});

describe("the turn policy against a fake server", () => {
  let server: FakeServer;
  let address = "";
  const seen: { observe: proto.ObserveRequest[]; policy?: proto.GetPolicyRequest } = { observe: [] };
  const trace = {
    phase: 0, rule: "question", importance: 0.4, parts: { personal: 0.4 },
    scores: { SAVE: 0.8, SKIP: -0.6 }, probability: 0.975, explored: false,
    features: { bias: 1 }, keepBy: "bandit",
  };

  before(async () => {
    const impl: Impl = {
      observe: (req) => {
        seen.observe.push(req);
        if (req.text === "down") {  // unavailable: a turn is sent once, a dry run again
          throw unavailable(10);
        }
        const dryRun = req.dryRun;
        return (create(proto.ObserveResponseSchema, {
          decision: { id: dryRun ? 0n : 7n, action: proto.TurnAction.RETRIEVE, keep: true,
            trace, at: TS_AT, dryRun },
          memory: dryRun ? undefined : pbMemory(A), created: !dryRun,
          results: dryRun ? [] : [{ memory: pbMemory(B), foundIn: proto.Zone.OUTER, relevance: 0.7 }],
          context: dryRun ? "" : "## outer\n- memory B", contextTokens: dryRun ? 0 : 9,
        }));
      },
      getPolicy: (req) => {
        seen.policy = req;
        return (create(proto.GetPolicyResponseSchema, {
          fingerprint: "f", exploration: 0.05, decisions: { RETRIEVE: 2n, SAVE: 1n }, phases: { "0": 2n, "2": 1n },
          kept: 3n, rewards: 1n, rewardSum: 0.3, updates: 1n, rewardByRule: { "0:question": 0.3 },
          last: [{ id: 3n, action: proto.TurnAction.SKIP, keep: false,
            trace: { ...trace, phase: 1, rule: "greeting, thanks or acknowledgement", keepBy: "" }, at: TS_AT }],
        }));
      },
      resetPolicy: () => ({ decisions: 3n }),
    };
    server = await fakeServer(impl);
    address = server.address;
  });
  after(() => server.close());

  test("observe sends the turn and answers the decision, the turn and the context block", async () => {
    const c = new CelestialClient({ address, tenant: "p" });
    try {
      const o = await c.observe("Where did I move?", {
        sessionId: "s", role: "user", previous: ["Hi", "I moved"], agentId: "a", limit: 5, maxTokens: 200,
      });
      const sent = seen.observe[0];
      assert.deepEqual([sent.tenant, sent.text, sent.sessionId, sent.role, sent.previous, sent.dryRun,
        sent.agentId, sent.limit, sent.maxTokens],
        ["p", "Where did I move?", "s", "user", ["Hi", "I moved"], false, "a", 5, 200]);
      assert.equal(o.decision.action, "RETRIEVE");
      assert.deepEqual(o.decision.trace, trace);
      assert.deepEqual([o.decision.id, o.decision.keep, o.decision.at, o.decision.dryRun], [7, true, AT, false]);
      assert.equal(o.memory?.id, A);
      assert.deepEqual(o.results.map((r) => r.memory.id), [B]);
      assert.deepEqual([o.context, o.contextTokens, o.created, o.mergedInto], ["## outer\n- memory B", 9, true, ""]);
      assert.deepEqual(JSON.parse(JSON.stringify(o.decision.trace)), o.decision.trace);
      const dry = await c.observe("Where did I move?", { dryRun: true });
      assert.equal(dry.memory, undefined);
      assert.equal(dry.decision.dryRun, true);
    } finally {
      c.close();
    }
  });

  test("a turn is never retried; a dry run is", async () => {
    const c = new CelestialClient({ address, tenant: "p", retries: 2 });
    try {
      seen.observe.length = 0;
      await assert.rejects(c.observe("down"), (err: unknown) =>
        err instanceof CelestialError && err.code === "UNAVAILABLE");
      assert.equal(seen.observe.length, 1, "one attempt");
      await assert.rejects(c.observe("down", { dryRun: true }));
      assert.equal(seen.observe.length, 4, "a dry run: three attempts");
    } finally {
      c.close();
    }
  });

  test("policy answers every action and phase in order; resetPolicy the dropped count", async () => {
    const c = new CelestialClient({ address, tenant: "p" });
    try {
      const p = await c.policy(5);
      assert.equal(seen.policy?.last, 5);
      assert.deepEqual(Object.entries(p.decisions), [["SAVE", 1], ["SKIP", 0], ["RETRIEVE", 2]]);
      assert.deepEqual(Object.entries(p.phases), [["0", 2], ["1", 0], ["2", 1]]);
      assert.deepEqual([p.kept, p.rewards, p.rewardSum, p.updates, p.exploration], [3, 1, 0.3, 1, 0.05]);
      assert.deepEqual(p.rewardByRule, { "0:question": 0.3 });
      assert.equal(p.savedAt, undefined);
      assert.deepEqual(p.last.map((d) => [d.id, d.action, d.keep, d.trace.rule]),
        [[3, "SKIP", false, "greeting, thanks or acknowledgement"]]);
      assert.equal(await c.resetPolicy(), 3);
    } finally {
      c.close();
    }
  });

  test("a skipped turn's ledger event converts", () => {
    const page = cv.ledger(create(proto.LedgerResponseSchema, { events: [{
      id: "e", memoryId: A, fromZone: proto.Zone.CLOUD,
      kind: proto.ZoneEventKind.SKIPPED, reason: "skipped", at: TS_AT,
    }] }));
    assert.equal(page.events[0].kind, "skipped");
    assert.equal(page.events[0].toZone, undefined);
  });
});

describe("serverConfig against a fake server", () => {
  let server: FakeServer;
  let address = "";
  let calls = 0;

  before(async () => {
    server = await fakeServer({
      getConfig: () => {
        if (++calls === 1) {
          throw unavailable(10); // a read: retried
        }
        return create(proto.GetConfigResponseSchema, { settings: [
          { name: "zone_capacities", value: "[20,100,1000,0,0]", source: proto.ConfigSource.DEFAULT,
            env: "CELESTIAL_ZONE_CAPACITIES" },
          { name: "max_tags", value: "32", source: proto.ConfigSource.ENV, env: "CELESTIAL_MAX_TAGS" },
          { name: "backend", value: "\"edge\"", source: proto.ConfigSource.FLAG, env: "CELESTIAL_BACKEND" },
          { name: "reinforce_flush_ms", value: "null", source: proto.ConfigSource.DEFAULT,
            env: "CELESTIAL_REINFORCE_FLUSH_MS" },
          { name: "llm_api_key", value: "set", source: proto.ConfigSource.ENV,
            env: "CELESTIAL_LLM_API_KEY", secret: true },
          { name: "qdrant_api_key", value: "", source: proto.ConfigSource.DEFAULT,
            env: "CELESTIAL_QDRANT_API_KEY", secret: true },
          { name: "newer", value: "not json", source: 9 as proto.ConfigSource, env: "CELESTIAL_NEWER" },
        ] });
      },
    });
    address = server.address;
  });
  after(() => server.close());

  test("the settings by name in the server's order, values as JSON reads them, secrets as sent", async () => {
    const c = new CelestialClient({ address, retries: { maxRetries: 2, initialBackoffMs: 1 } });
    try {
      const config = await c.serverConfig();
      assert.equal(calls, 2, "retried once");
      assert.deepEqual(Object.keys(config), ["zone_capacities", "max_tags", "backend",
        "reinforce_flush_ms", "llm_api_key", "qdrant_api_key", "newer"]);
      assert.deepEqual(config.zone_capacities, { name: "zone_capacities", value: [20, 100, 1000, 0, 0],
        source: "default", env: "CELESTIAL_ZONE_CAPACITIES", secret: false });
      assert.deepEqual([config.max_tags.value, config.max_tags.source], [32, "env"]);
      assert.deepEqual([config.backend.value, config.backend.source], ["edge", "flag"]);
      assert.equal(config.reinforce_flush_ms.value, null);
      assert.deepEqual([config.llm_api_key.value, config.llm_api_key.secret], ["set", true]);
      assert.deepEqual([config.qdrant_api_key.value, config.qdrant_api_key.secret], ["", true]);
      // A value that is not JSON, and a source this client does not know: as they came, and "".
      assert.deepEqual([config.newer.value, config.newer.source], ["not json", ""]);
    } finally {
      c.close();
    }
  });
});
