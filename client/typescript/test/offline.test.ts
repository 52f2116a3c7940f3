// Without the real server: error details decoded from a hand-made status, and retries against a
// grpc-js server in this process that fails on purpose.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { CelestialClient, CelestialError, proto, toCelestialError } from "../src/index";
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
