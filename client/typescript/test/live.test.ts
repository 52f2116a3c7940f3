// Against a live server at CELESTIAL_TEST_ADDRESS (host:port, plaintext, no API keys); skipped
// without one. Each test writes to a tenant of its own, so that a shared server is fine.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { CelestialClient, CelestialError, type Memory, ZONES } from "../src/index";

const ADDRESS = process.env.CELESTIAL_TEST_ADDRESS;
const DIMENSION = 384; // the server's embedding model; vectors given by the test skip embedding
const RUN = `${process.pid}-${Date.now()}`;

function client(tenant: string): CelestialClient {
  return new CelestialClient({ address: ADDRESS!, tenant, timeoutMs: 20_000 });
}

/** A unit vector, different for each seed. */
function vector(seed: number): number[] {
  const v = Array.from({ length: DIMENSION }, (_, i) => Math.sin(seed * 7919 + i * 31 + 1));
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
}

/** n memories with their own vectors and creation times one second apart, oldest first. */
async function storeMany(c: CelestialClient, n: number): Promise<string[]> {
  const base = Date.UTC(2023, 0, 1);
  const { ids } = await c.storeBatch(Array.from({ length: n }, (_, i) => ({
    content: `memory number ${i}`, importance: 0.5, vector: vector(i),
    createdAt: new Date(base + i * 1000),
  })));
  assert.equal(ids.length, n);
  return ids;
}

describe("a live server", { skip: ADDRESS ? false : "CELESTIAL_TEST_ADDRESS is not set" }, () => {
  let c: CelestialClient;
  before(() => {
    c = client(`ts-${RUN}`);
  });
  after(() => c?.close());

  test("store, get and recall round trip", async () => {
    const { memory } = await c.store("The TypeScript team ships on Thursdays", {
      importance: 0.7, tags: ["schedule"], metadata: { source: "test" },
    });
    assert.match(memory.id, /^[0-9a-f-]{36}$/);
    assert.ok(ZONES.includes(memory.zone));
    assert.ok(memory.createdAt instanceof Date && memory.createdAt.getTime() > 0);

    const got = await c.get(memory.id);
    assert.equal(got.content, "The TypeScript team ships on Thursdays");
    assert.deepEqual(got.tags, ["schedule"]);
    assert.deepEqual(got.metadata, { source: "test" });
    assert.equal(got.importance, 0.7);

    const results = await c.recall("When does the TypeScript team ship?", { limit: 3 });
    assert.equal(results[0]?.memory.id, memory.id);
    assert.ok(results[0].relevance > 0.4, `relevance ${results[0].relevance}`);
    assert.ok(ZONES.includes(results[0].foundIn));
    assert.equal(results[0].memory.recallCount, 1);
  });

  test("update and delete", async () => {
    const { memory } = await c.store("to be changed", { importance: 0.2, tags: ["a"] });
    const changed = await c.update(memory.id, { importance: 0.9, tags: [], pinned: true });
    assert.equal(changed.importance, 0.9);
    assert.deepEqual(changed.tags, []);
    assert.equal(changed.pinned, true);
    assert.equal(changed.content, "to be changed");
    assert.equal(await c.delete(memory.id), true);
    assert.equal(await c.delete(memory.id), false);
    await assert.rejects(c.get(memory.id), (err: unknown) =>
      err instanceof CelestialError && err.code === "NOT_FOUND");
  });

  test("a bad request is a CelestialError naming the field", async () => {
    const err = await c.store("   ").then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof CelestialError, `not a CelestialError: ${err}`);
    assert.ok(err instanceof Error);
    assert.equal(err.name, "CelestialError");
    assert.equal(err.code, "INVALID_ARGUMENT");
    assert.equal(err.grpcCode, 3);
    assert.equal(err.field, "content");
    assert.equal(err.reason, "INVALID_ARGUMENT");
    assert.equal(err.domain, "celestial-memory");
    assert.equal(err.violations[0]?.field, "content");
    assert.ok(err.violations[0].description.length > 0);
    assert.ok(err.details.startsWith("content"), err.details);
    assert.equal(err.retryAfterMs, undefined);
    assert.equal(JSON.parse(JSON.stringify(err)).field, "content");
  });

  test("a bad batch is refused whole, naming the item", async () => {
    const err = await c.storeBatch(["fine", { content: "" }]).then(() => undefined, (e) => e);
    assert.ok(err instanceof CelestialError);
    assert.equal(err.code, "INVALID_ARGUMENT");
    assert.match(err.field ?? "", /\[1\]\.content$/);
  });

  test("stats: five zones, the Cloud without a lower bound, and JSON works", async () => {
    const stats = await c.stats();
    assert.deepEqual(stats.zones.map((z) => z.zone), [...ZONES]);
    const cloud = stats.zones[4];
    assert.equal(cloud.minScore, undefined);
    assert.ok(!("minScore" in cloud));
    assert.equal(typeof stats.zones[0].minScore, "number");
    assert.equal(stats.dimension, DIMENSION);
    assert.ok(["edge", "qdrant-local", "qdrant-remote"].includes(stats.backend), stats.backend);
    const json = JSON.parse(JSON.stringify(stats));
    assert.deepEqual(json, stats);
  });

  test("recentAll pages through every memory once, newest first", async () => {
    const t = client(`ts-recent-${RUN}`);
    try {
      const ids = await storeMany(t, 25);
      const first = await t.recent({ pageSize: 10 });
      assert.equal(first.memories.length, 10, "a first page of pageSize");
      assert.notEqual(first.nextPageToken, "", "a nextPageToken after the first page");
      const seen: Memory[] = [];
      for await (const m of t.recentAll({ pageSize: 10 })) {
        seen.push(m);
      }
      assert.deepEqual(seen.map((m) => m.id), [...ids].reverse());
      assert.equal(new Set(seen.map((m) => m.id)).size, 25);
    } finally {
      t.close();
    }
  });

  test("listAll pages through every memory once, in id order", async () => {
    const t = client(`ts-list-${RUN}`);
    try {
      const ids = await storeMany(t, 25);
      const first = await t.list({ pageSize: 10 });
      assert.equal(first.memories.length, 10, "a first page of pageSize");
      assert.notEqual(first.nextPageToken, "", "a nextPageToken after the first page");
      const seen: string[] = [];
      for await (const m of t.listAll({ pageSize: 10 })) {
        seen.push(m.id);
      }
      assert.deepEqual(seen, [...ids].sort());
    } finally {
      t.close();
    }
  });

  test("a Store repeated with its requestId answers the same memory, not created", async () => {
    const requestId = randomUUID();
    const first = await c.store("stored once however often it is sent", { requestId });
    const again = await c.store("stored once however often it is sent", { requestId });
    assert.equal(again.memory.id, first.memory.id, "the same memory for the same requestId");
    assert.equal(first.created, true, "created the first time");
    assert.equal(again.created, false, "not created the second time");
    // Other content under the same key is refused, naming the field that made the id.
    await assert.rejects(c.store("other content", { requestId }), (err: unknown) => {
      assert.ok(err instanceof CelestialError);
      assert.equal(err.code, "ALREADY_EXISTS");
      assert.equal(err.reason, "ALREADY_EXISTS");
      assert.equal(err.field, "request_id");
      return true;
    });
  });

  test("ledger answers a page", async () => {
    const page = await c.ledger({ pageSize: 10 });
    assert.ok(Array.isArray(page.events) && Array.isArray(page.adminEvents));
    assert.equal(typeof page.nextPageToken, "string");
  });
});
