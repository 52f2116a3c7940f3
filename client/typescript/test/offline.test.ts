// Without the real server: error details decoded from a hand-made status, retries against a
// grpc-js server in this process that fails on purpose, the conversion of generated messages, and
// the graph methods against a grpc-js server in this process that answers made-up pages.
import assert from "node:assert/strict";
import * as net from "node:net";
import { after, before, describe, test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import * as cv from "../src/convert";
import {
  CelestialClient, CelestialError, proto, TLS_EXPECTED_HINT, TLS_UNEXPECTED_HINT, toCelestialError,
} from "../src/index";
import { BadRequest, ErrorInfo, RetryInfo } from "../src/gen/google/rpc/error_details";
import { Status } from "../src/gen/google/rpc/status";

const TYPE = "type.googleapis.com/google.rpc.";

/** The trailers the server sends with an error: a google.rpc.Status with its details. */
function trailers(code: grpc.status, message: string, details: { typeUrl: string; value: Buffer }[]) {
  const md = new grpc.Metadata();
  md.set("grpc-status-details-bin", Buffer.from(Status.encode({ code, message, details }).finish()));
  return md;
}

function unavailable(retryMs: number): grpc.ServiceError {
  const retry = Buffer.from(RetryInfo.encode({ retryDelay: { seconds: 0, nanos: retryMs * 1e6 } }).finish());
  const info = Buffer.from(ErrorInfo.encode({ reason: "UNAVAILABLE", domain: "celestial-memory", metadata: {} }).finish());
  return Object.assign(new Error("14 UNAVAILABLE: the store is down"), {
    code: grpc.status.UNAVAILABLE, details: "the store is down",
    metadata: trailers(grpc.status.UNAVAILABLE, "the store is down", [
      { typeUrl: TYPE + "ErrorInfo", value: info }, { typeUrl: TYPE + "RetryInfo", value: retry },
    ]),
  });
}

describe("a fake server that fails on purpose", () => {
  const server = new grpc.Server();
  const calls: Record<string, number> = {};
  let address = "";
  const count = (name: string) => {
    calls[name] = (calls[name] ?? 0) + 1;
    return calls[name];
  };
  const stats = { zones: [], total: 0, embeddingModel: "fake", dimension: 3, backend: "", storageBackend: 1, archived: 0 };

  before(async () => {
    const impl: Partial<proto.MemoryServiceServer> = {
      // Unavailable twice with a 50 ms RetryInfo, then answers.
      stats: (_call, cb) => (count("stats") <= 2 ? cb(unavailable(50)) : cb(null, stats)),
      store: (_call, cb) => {
        count("store");
        cb(unavailable(10));
      },
      recall: (_call, cb) => {
        count("recall");
        cb(unavailable(10));
      },
      get: (call, cb) => {
        const bad = Buffer.from(BadRequest.encode({ fieldViolations: [
          { field: "id", description: "is not a UUID", reason: "", localizedMessage: undefined },
        ] }).finish());
        const info = Buffer.from(ErrorInfo.encode({ reason: "INVALID_ARGUMENT", domain: "celestial-memory", metadata: {} }).finish());
        cb({
          code: grpc.status.INVALID_ARGUMENT, details: `id: ${call.request.id} is not a UUID`,
          metadata: trailers(grpc.status.INVALID_ARGUMENT, "id", [
            { typeUrl: TYPE + "ErrorInfo", value: info }, { typeUrl: TYPE + "BadRequest", value: bad },
          ]),
        });
      },
    };
    server.addService(proto.MemoryServiceService, impl as proto.MemoryServiceServer);
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p)));
    address = `127.0.0.1:${port}`;
  });
  after(() => server.forceShutdown());

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
    const c = new CelestialClient({ address, retries: { maxRetries: 100 }, timeoutMs: 200 });
    try {
      calls.recall = 0;
      const started = Date.now();
      await assert.rejects(c.recall("q", { reinforce: false }), CelestialError);
      assert.ok(Date.now() - started < 1000);
      assert.ok(calls.recall > 1 && calls.recall < 30, `${calls.recall} calls`);
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
      assert.equal(err.grpcCode, grpc.status.INVALID_ARGUMENT);
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
  const md = new grpc.Metadata();
  md.set("grpc-status-details-bin", Buffer.from([0xff, 0xff, 0xff]));
  const err = toCelestialError(Object.assign(new Error("13 INTERNAL: boom"), {
    code: grpc.status.INTERNAL, details: "boom", metadata: md,
  }));
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

/** A relation as the server would send it. */
function rel(id: string, relation: string, weight: number, madeBy: string, outgoing: boolean) {
  return { id, relation, weight, madeBy, createdAt: AT as Date | undefined, outgoing };
}

/** A generated Memory, as the server would send it. */
function pbMemory(id: string, more: Partial<proto.Memory> = {}): proto.Memory {
  return proto.Memory.fromPartial({
    id, tenant: "t", content: `memory ${id}`, zone: proto.Zone.ZONE_OUTER, createdAt: AT,
    lastRecalledAt: AT, ...more,
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
    const wire = proto.ReflectResponse.decode(proto.ReflectResponse.encode(
      proto.ReflectResponse.fromPartial({
        insights: [{ id: A, content: "Alice asks about ethics", entity: "name:alice",
                     sourceIds: [B, C], created: true }],
        summaries: [{ entity: "name:alice", summary: "Alice works at Acme.", id: C,
                      sourceIds: [B] }],
        dryRun: false, memoriesRead: 12, modelCalls: 1, modelTokens: 345,
      })).finish());
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
        rel(B, "follows", 0.5, "caller", true),
        { ...rel(C, "follows", 1, "session", false), createdAt: undefined },
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
    const wire = proto.Memory.decode(proto.Memory.encode(pbMemory(A, {
      relations: [rel(B, "about", 0.25, "repeat", true)],
      entities: ["title:dune"],
    })).finish());
    assert.deepEqual(cv.memory(wire).relations, [rel(B, "about", 0.25, "repeat", true)]);
    assert.deepEqual(cv.memory(wire).entities, ["title:dune"]);
  });

  test("a recall result's via, only when expansion reached it", () => {
    const [seed, lifted] = cv.recallResults(proto.RecallResponse.fromPartial({
      results: [
        { memory: pbMemory(A), foundIn: proto.Zone.ZONE_CORE, relevance: 0.9 },
        {
          memory: pbMemory(B), foundIn: proto.Zone.ZONE_OUTER, relevance: 0.4,
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
    const sent = (o: Parameters<typeof cv.recallRequest>[2]) => proto.RecallRequest.decode(
      proto.RecallRequest.encode(cv.recallRequest("t", "q", o)).finish());
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
    const out = cv.related(proto.RelatedResponse.fromPartial({
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
    assert.deepEqual(cv.entity(proto.Entity.fromPartial(e)), e);
    const later = new Date(AT.getTime() + 86_400_000);
    const p = cv.entityProfile(proto.EntityProfile.fromPartial({
      entity: e, firstSeen: AT, lastSeen: later, mostRecalled: [pbMemory(A), pbMemory(B)],
    }));
    assert.deepEqual(p.entity, e);
    assert.deepEqual(p.firstSeen, AT);
    assert.deepEqual(p.lastSeen, later);
    assert.deepEqual(p.mostRecalled.map((m) => m.id), [A, B]);
    assert.throws(() => cv.entityProfile(undefined), /without the entity's profile/);
  });
});

describe("a fake server of the graph methods", () => {
  const server = new grpc.Server();
  let address = "";
  const seen: {
    relate?: proto.RelateRequest; unrelate?: proto.UnrelateRequest; recall?: proto.RecallRequest;
    related: proto.RelatedRequest[]; entities: proto.EntitiesRequest[];
  } = { related: [], entities: [] };
  // Related answers C, B and A over three pages; Entities two entities over two pages.
  const walk = [C, B, A];
  const names = [
    { id: "name:caroline", kind: "name", key: "caroline", mentions: 2 },
    { id: "date:2023-05-07", kind: "date", key: "2023-05-07", mentions: 1 },
  ];

  before(async () => {
    const impl: Partial<proto.MemoryServiceServer> = {
      relate: (call, cb) => {
        seen.relate = call.request;
        const r = call.request;
        const relation = rel(r.toId, r.relation, r.weight ?? 1, "caller", true);
        cb(null, { created: true, relation });
      },
      unrelate: (call, cb) => {
        seen.unrelate = call.request;
        cb(null, { removed: 2 });
      },
      related: (call, cb) => {
        seen.related.push(call.request);
        if (call.request.id === B) {
          // A server that answers the token it was sent would page forever.
          cb(null, { memories: [], nextPageToken: call.request.pageToken || "same" });
          return;
        }
        const i = Number(call.request.pageToken || "0");
        cb(null, {
          memories: [{
            memory: pbMemory(walk[i]),
            path: [{ fromId: A, toId: walk[i], relation: "follows", weight: 1 }],
          }],
          nextPageToken: i + 1 < walk.length ? String(i + 1) : "",
        });
      },
      entities: (call, cb) => {
        seen.entities.push(call.request);
        if (call.request.entity) {
          if (call.request.entity !== names[0].id) {
            cb({ code: grpc.status.NOT_FOUND, details: `entity ${call.request.entity}` });
            return;
          }
          cb(null, {
            entities: [], nextPageToken: "",
            profile: { entity: names[0], firstSeen: AT, lastSeen: AT, mostRecalled: [pbMemory(A)],
                       summary: "", summaryId: "" },
          });
          return;
        }
        const i = Number(call.request.pageToken || "0");
        cb(null, { entities: [names[i]], nextPageToken: i === 0 ? "1" : "", profile: undefined });
      },
      recall: (call, cb) => {
        seen.recall = call.request;
        cb(null, proto.RecallResponse.fromPartial({
          results: [
            { memory: pbMemory(A), foundIn: proto.Zone.ZONE_CORE, relevance: 0.9 },
            {
              memory: pbMemory(B), foundIn: proto.Zone.ZONE_BELT, relevance: 0.3,
              via: { fromId: A, relation: "follows", weight: 0.5, hops: 1 },
            },
          ],
        }));
      },
    };
    server.addService(proto.MemoryServiceService, impl as proto.MemoryServiceServer);
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p)));
    address = `127.0.0.1:${port}`;
  });
  after(() => server.forceShutdown());

  test("relate sends its arguments and answers the relation", async () => {
    const c = new CelestialClient({ address, tenant: "g" });
    try {
      const r = await c.relate(A, B, "follows", 0.25);
      assert.deepEqual(seen.relate,
        { tenant: "g", fromId: A, toId: B, relation: "follows", weight: 0.25 });
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
      assert.deepEqual(seen.unrelate, { tenant: "g", fromId: A, toId: B, relation: "" });
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
      assert.deepEqual(seen.related[0], {
        tenant: "g", id: A, depth: 2, relations: ["follows"], pageSize: 1, pageToken: "",
      });
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
    const wire = (more: Partial<proto.Memory>) =>
      cv.memory(proto.Memory.decode(proto.Memory.encode(pbMemory(A, more)).finish()));
    assert.deepEqual(wire({ nextMove: { zone: proto.Zone.ZONE_BELT, at: AT, archive: false } })
      .nextMove, { zone: "belt", at: AT, archive: false });
    assert.deepEqual(wire({ nextMove: { zone: proto.Zone.ZONE_UNSPECIFIED, at: AT, archive: true } })
      .nextMove, { at: AT, archive: true });
    assert.equal(wire({}).nextMove, undefined);
  });
});

describe("types, protection and feedback against a fake server", () => {
  const server = new grpc.Server();
  let address = "";
  const seen: {
    store?: proto.StoreRequest; recall?: proto.RecallRequest; feedback: proto.FeedbackRequest[];
  } = { feedback: [] };

  before(async () => {
    const impl: Partial<proto.MemoryServiceServer> = {
      store: (call, cb) => {
        seen.store = call.request;
        const r = call.request;
        cb(null, { created: true, mergedInto: "", memory: pbMemory(A, {
          memoryType: r.memoryType || proto.MemoryType.MEMORY_TYPE_EPISODE, immutable: r.immutable,
        }) });
      },
      recall: (call, cb) => {
        seen.recall = call.request;
        cb(null, proto.RecallResponse.fromPartial({ results: [] }));
      },
      feedback: (call, cb) => {
        seen.feedback.push(call.request);
        if (seen.feedback.length === 3) {  // once unavailable: a vote is never sent twice
          cb(unavailable(10));
          return;
        }
        const helpful = call.request.verdict === proto.Verdict.VERDICT_HELPFUL;
        cb(null, { importanceBefore: 0.5, memory: pbMemory(call.request.id, {
          importance: helpful ? 0.6 : 0.4,
        }) });
      },
    };
    server.addService(proto.MemoryServiceService, impl as proto.MemoryServiceServer);
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p)));
    address = `127.0.0.1:${port}`;
  });
  after(() => server.forceShutdown());

  test("store sends the type and the flag, and reads them back", async () => {
    const c = new CelestialClient({ address, tenant: "u" });
    try {
      const { memory } = await c.store("Alice prefers tea", { memoryType: "preference", immutable: true });
      assert.equal(seen.store?.memoryType, proto.MemoryType.MEMORY_TYPE_PREFERENCE);
      assert.equal(seen.store?.immutable, true);
      assert.equal(memory.memoryType, "preference");
      assert.equal(memory.immutable, true);
      const plain = await c.store("we met at noon");
      assert.equal(seen.store?.memoryType, proto.MemoryType.MEMORY_TYPE_UNSPECIFIED);
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
        [proto.MemoryType.MEMORY_TYPE_FACT, proto.MemoryType.MEMORY_TYPE_EPISODE]);
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
        ["u", A, proto.Verdict.VERDICT_HELPFUL], ["u", B, proto.Verdict.VERDICT_NOT_HELPFUL]]);
      await assert.rejects(c.feedback(C, true), (err: unknown) =>
        err instanceof CelestialError && err.code === "UNAVAILABLE");
      assert.equal(seen.feedback.length, 3, "one attempt");
    } finally {
      c.close();
    }
  });

  test("feedback events and unknown types convert", () => {
    const page = cv.ledger(proto.LedgerResponse.fromPartial({ events: [{
      id: "e", memoryId: A, fromZone: proto.Zone.ZONE_BELT, toZone: proto.Zone.ZONE_OUTER,
      kind: proto.ZoneEventKind.ZONE_EVENT_KIND_FEEDBACK_NOT_HELPFUL, at: AT,
    }] }));
    assert.equal(page.events[0].kind, "not_helpful");
    assert.equal(cv.memory(pbMemory(A, { memoryType: 42 as proto.MemoryType })).memoryType, "episode");
  });
});

describe("the turn policy against a fake server", () => {
  const server = new grpc.Server();
  let address = "";
  const seen: { observe: proto.ObserveRequest[]; policy?: proto.GetPolicyRequest } = { observe: [] };
  const trace = {
    phase: 0, rule: "question", importance: 0.4, parts: { personal: 0.4 },
    scores: { SAVE: 0.8, SKIP: -0.6 }, probability: 0.975, explored: false,
    features: { bias: 1 }, keepBy: "bandit",
  };

  before(async () => {
    const impl: Partial<proto.MemoryServiceServer> = {
      observe: (call, cb) => {
        seen.observe.push(call.request);
        if (call.request.text === "down") {  // unavailable: a turn is sent once, a dry run again
          cb(unavailable(10));
          return;
        }
        const dryRun = call.request.dryRun;
        cb(null, proto.ObserveResponse.fromPartial({
          decision: { id: dryRun ? 0 : 7, action: proto.TurnAction.TURN_ACTION_RETRIEVE, keep: true,
            trace, at: AT, dryRun },
          memory: dryRun ? undefined : pbMemory(A), created: !dryRun,
          results: dryRun ? [] : [{ memory: pbMemory(B), foundIn: proto.Zone.ZONE_OUTER, relevance: 0.7 }],
          context: dryRun ? "" : "## outer\n- memory B", contextTokens: dryRun ? 0 : 9,
        }));
      },
      getPolicy: (call, cb) => {
        seen.policy = call.request;
        cb(null, proto.GetPolicyResponse.fromPartial({
          fingerprint: "f", exploration: 0.05, decisions: { RETRIEVE: 2, SAVE: 1 }, phases: { "0": 2, "2": 1 },
          kept: 3, rewards: 1, rewardSum: 0.3, updates: 1, rewardByRule: { "0:question": 0.3 },
          last: [{ id: 3, action: proto.TurnAction.TURN_ACTION_SKIP, keep: false,
            trace: { ...trace, phase: 1, rule: "greeting, thanks or acknowledgement", keepBy: "" }, at: AT }],
        }));
      },
      resetPolicy: (_call, cb) => cb(null, { decisions: 3 }),
    };
    server.addService(proto.MemoryServiceService, impl as proto.MemoryServiceServer);
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p)));
    address = `127.0.0.1:${port}`;
  });
  after(() => server.forceShutdown());

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
    const page = cv.ledger(proto.LedgerResponse.fromPartial({ events: [{
      id: "e", memoryId: A, fromZone: proto.Zone.ZONE_CLOUD,
      kind: proto.ZoneEventKind.ZONE_EVENT_KIND_SKIPPED, reason: "skipped", at: AT,
    }] }));
    assert.equal(page.events[0].kind, "skipped");
    assert.equal(page.events[0].toZone, undefined);
  });
});
