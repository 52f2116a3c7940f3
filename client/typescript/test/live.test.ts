// Against a live server at CELESTIAL_TEST_ADDRESS (host:port, plaintext, no API keys); skipped
// without one. Each test writes to a tenant of its own, so that a shared server is fine.
// CELESTIAL_TEST_KEYED_ADDRESS is one with API keys: CELESTIAL_TEST_ADMIN_KEY (admin, every
// tenant), CELESTIAL_TEST_WRITE_KEY (write, one tenant), and CELESTIAL_TEST_SECRET the value of a
// secret setting it was started with (qdrant_api_key, a flag); skipped without one.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { CelestialClient, CelestialError, type Memory, proto, toCelestialError, ZONES } from "../src/index";

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

const CAROLINE = "name:caroline";

/** Three turns of one session, oldest first, 100 s apart: each follows the one before it. */
async function storeSession(c: CelestialClient): Promise<Memory[]> {
  const base = Date.UTC(2023, 0, 1);
  const texts = [
    "Caroline: I went to the support group in Boston",
    "Melanie: that sounds brave, how did it go?",
    "Caroline: it helped a lot, I am going again next week",
  ];
  const out: Memory[] = [];
  for (const [i, content] of texts.entries()) {
    const createdAt = new Date(base + i * 100_000);
    out.push((await c.store(content, { sessionId: "chat-1", createdAt })).memory);
  }
  return out;
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

  test("relate, related and unrelate: session order, walks and pages", async () => {
    const t = client(`ts-graph-${RUN}`);
    try {
      const [a, b, c] = await storeSession(t);
      // Each memory of a session follows the previous one; both ends hold the relation.
      const middle = await t.get(b.id);
      assert.deepEqual(
        middle.relations.map((r) => [r.id, r.relation, r.outgoing, r.madeBy]).sort(),
        [[a.id, "follows", true, "session"], [c.id, "follows", false, "session"]].sort());
      assert.ok(middle.relations.every((r) =>
        r.weight > 0 && r.weight <= 1 && r.createdAt instanceof Date));

      const made = await t.relate(a.id, c.id, "about", 0.5);
      assert.equal(made.created, true);
      assert.deepEqual([made.relation.id, made.relation.relation, made.relation.weight,
        made.relation.madeBy, made.relation.outgoing], [c.id, "about", 0.5, "caller", true]);
      const again = await t.relate(a.id, c.id, "about", 0.9);
      assert.equal(again.created, false, "relating again only sets the weight");
      assert.equal(again.relation.weight, 0.9);
      assert.equal((await t.relate(b.id, c.id, "mentions")).relation.weight, 1, "no weight: 1");
      const incoming = (await t.get(c.id)).relations.filter((r) => r.relation === "about");
      assert.deepEqual(incoming.map((r) => [r.id, r.weight, r.outgoing]), [[a.id, 0.9, false]]);

      // One step from a: b (against its "follows") and c (along "about").
      const one = await t.related(a.id);
      assert.deepEqual(one.map((r) => r.memory.id).sort(), [b.id, c.id].sort());
      const [viaAbout, ...rest] = await t.related(a.id, { relations: ["about"] });
      assert.equal(rest.length, 0);
      assert.equal(viaAbout.memory.id, c.id);
      assert.equal(viaAbout.memory.content, c.content);
      assert.deepEqual(viaAbout.path,
        [{ fromId: a.id, toId: c.id, relation: "about", weight: 0.9 }]);
      // Two steps along "follows" only: b, then c through b, nearest first.
      const two = await t.related(a.id, { depth: 2, relations: ["follows"] });
      assert.deepEqual(two.map((r) => r.memory.id), [b.id, c.id]);
      assert.deepEqual(two[1].path.map((h) => [h.fromId, h.toId, h.relation]),
        [[b.id, a.id, "follows"], [c.id, b.id, "follows"]]);
      // One memory a page: the client follows the pages to the same answer.
      const paged = await t.related(a.id, { depth: 2, relations: ["follows"], pageSize: 1 });
      assert.deepEqual(paged, two);

      // Unrelate: in that direction only; no relation removes every one.
      assert.equal(await t.unrelate(c.id, a.id, "about"), 0);
      assert.equal(await t.unrelate(a.id, c.id, "about"), 1);
      assert.deepEqual(await t.related(a.id, { relations: ["about"] }), []);
      await t.relate(a.id, c.id, "about");
      await t.relate(a.id, c.id, "cites");
      assert.equal(await t.unrelate(a.id, c.id), 2);

      await assert.rejects(t.relate(a.id, c.id, "Not A Name"), (err: unknown) =>
        err instanceof CelestialError && err.code === "INVALID_ARGUMENT");
      await assert.rejects(t.related(a.id, { depth: 4 }), (err: unknown) =>
        err instanceof CelestialError && err.code === "INVALID_ARGUMENT");
    } finally {
      t.close();
    }
  });

  test("entities, an entity's profile, entitiesAny and expand", async () => {
    const t = client(`ts-entities-${RUN}`);
    try {
      const [a, b, c] = await storeSession(t);
      assert.ok(a.entities.includes(CAROLINE) && c.entities.includes(CAROLINE), `${a.entities}`);

      const listed = await t.entities();
      const caroline = listed.find((e) => e.id === CAROLINE);
      assert.deepEqual(caroline && [caroline.key, caroline.mentions], ["caroline", 2]);
      assert.deepEqual(await t.entities({ pageSize: 1 }), listed, "every page, in order");

      const profile = await t.entity(CAROLINE);
      assert.deepEqual(profile.entity, caroline);
      assert.deepEqual(profile.firstSeen, a.createdAt);
      assert.deepEqual(profile.lastSeen, c.createdAt);
      await assert.rejects(t.entity("name:nobody-at-all"), (err: unknown) =>
        err instanceof CelestialError && err.code === "NOT_FOUND");
      assert.equal(profile.summary, "", "no reflection yet");
      // The test server has no model: reflection is refused, not faked.
      await assert.rejects(t.reflect(), (err: unknown) =>
        err instanceof CelestialError && err.code === "FAILED_PRECONDITION"
        && err.message.includes("needs a model"));

      const found = await t.recall("how did it go?", {
        limit: 10, entitiesAny: [CAROLINE], reinforce: false,
      });
      assert.ok(found.length > 0);
      assert.ok(found.every((r) => r.memory.id === a.id || r.memory.id === c.id));
      assert.ok(!(await t.recent({ entitiesAny: [CAROLINE] })).memories.some((m) => m.id === b.id));

      await t.relate(a.id, c.id, "about", 1);
      const query = "the support group in Boston";
      const plain = await t.recall(query, { expand: 0, minRelevance: 0, reinforce: false });
      assert.ok(plain.length > 0 && plain.every((r) => r.via === undefined));
      const expanded = await t.recall(query, { expand: 1, minRelevance: 0, reinforce: false });
      assert.equal(expanded[0].memory.id, a.id);
      assert.equal(expanded[0].via, undefined, "the seed, found by itself");
      const reached = expanded.filter((r) => r.via !== undefined);
      assert.ok(reached.length > 0);
      for (const r of reached) {
        assert.ok([b.id, c.id].includes(r.memory.id));
        assert.equal(r.via?.fromId, a.id);
        assert.equal(r.via?.hops, 1);
        assert.ok(["about", "follows"].includes(r.via?.relation ?? ""));
      }
      assert.deepEqual(JSON.parse(JSON.stringify(reached[0].via)), reached[0].via);
    } finally {
      t.close();
    }
  });

  test("types, an immutable memory and feedback", async () => {
    const fact = (await c.store("The TypeScript build needs Node 20", { memoryType: "fact" })).memory;
    assert.equal(fact.memoryType, "fact");
    const found = await c.recall("Which Node does the build need?", {
      limit: 5, reinforce: false, memoryTypes: ["fact"],
    });
    assert.ok(found.length > 0 && found.every((r) => r.memory.memoryType === "fact"));
    const kept = (await c.store("The release key is in the vault", { immutable: true })).memory;
    assert.equal(kept.immutable, true);
    assert.equal(kept.memoryType, "episode");
    await assert.rejects(c.update(kept.id, { importance: 0.9 }), (err: unknown) =>
      err instanceof CelestialError && err.code === "FAILED_PRECONDITION" && err.reason === "IMMUTABLE");
    const voted = await c.feedback(fact.id, true);
    assert.ok(voted.importance > fact.importance);
    const events = (await c.ledger({ memoryId: fact.id })).events;
    assert.ok(events.some((e) => e.kind === "helpful"));
  });

  test("observe: a greeting skipped into the archive, a fact saved, a question retrieving it", async () => {
    const t = client(`ts-policy-${RUN}`);
    try {
      const session = { sessionId: "lisbon" };
      const hello = await t.observe("Hello!", session);
      assert.equal(hello.decision.action, "SKIP");
      assert.equal(hello.decision.keep, false);
      assert.equal(hello.decision.trace.phase, 1);
      assert.ok(hello.decision.trace.rule);
      assert.equal(hello.memory?.archived, true);
      assert.equal(hello.memory?.metadata.policy, "SKIP");
      const fact = "My sister Ana and I moved to Lisbon in May 2023, and I prefer the coast.";
      const saved = await t.observe(fact, { ...session, previous: ["Hello!"] });
      assert.equal(saved.decision.action, "SAVE");
      assert.equal(saved.memory?.archived, false);
      assert.equal(saved.created, true);
      const dry = await t.observe("Which city did my sister Ana and I move to?", { dryRun: true });
      assert.equal(dry.decision.action, "RETRIEVE");
      assert.equal(dry.decision.id, 0);
      assert.equal(dry.memory, undefined);
      const asked = await t.observe("Which city did my sister Ana and I move to? I usually forget.",
        session);
      assert.equal(asked.decision.action, "RETRIEVE");
      assert.equal(asked.decision.trace.phase, 0);
      assert.match(asked.context, /Lisbon/);
      assert.ok(asked.contextTokens > 0);
      assert.ok(asked.results.some((r) => r.memory.id === saved.memory?.id));
      const found = await t.recall("Hello!", { includeArchived: true, reinforce: false });
      assert.ok(found.some((r) => r.memory.id === hello.memory?.id && r.archived));

      const p = await t.policy(2);
      assert.deepEqual(p.decisions, { SAVE: 1, SKIP: 1, RETRIEVE: 1 });
      assert.equal(p.phases["0"] + p.phases["1"] + p.phases["2"], 3);
      assert.deepEqual(p.last.map((d) => d.action), ["RETRIEVE", "SAVE"]);
      assert.equal(p.fingerprint.length, 64);
      assert.equal(await t.resetPolicy(), 3);
      assert.deepEqual((await t.policy()).decisions, { SAVE: 0, SKIP: 0, RETRIEVE: 0 });
    } finally {
      t.close();
    }
  });

  test("serverConfig: a server without keys answers any caller", async () => {
    const config = await c.serverConfig();
    assert.ok(Object.keys(config).length > 10);
    assert.deepEqual(config.api_keys_file, { name: "api_keys_file", value: null, source: "default",
      env: "CELESTIAL_API_KEYS_FILE", secret: false });
    assert.ok(Array.isArray(config.zone_capacities.value));
  });

  test("ledger answers a page", async () => {
    const page = await c.ledger({ pageSize: 10 });
    assert.ok(Array.isArray(page.events) && Array.isArray(page.adminEvents));
    assert.equal(typeof page.nextPageToken, "string");
  });

  test("the stub: Export streams every memory, with the client's metadata", async () => {
    const e = client(`ts-export-${RUN}`);
    try {
      const ids = await storeMany(e, 3);
      const exported: proto.ExportedMemory[] = [];
      for await (const record of e.stub.export({ tenant: e.tenant }, { headers: e.callMetadata() })) {
        exported.push(record);
      }
      assert.deepEqual(exported.map((r) => r.memory?.id).sort(), [...ids].sort());
      assert.equal(exported[0].vector.length, DIMENSION);
      const err = await e.stub.get({ tenant: e.tenant, id: "not-a-uuid" }).then(() => undefined,
        (x: unknown) => toCelestialError(x));
      assert.ok(err instanceof CelestialError && err.code === "INVALID_ARGUMENT", String(err));
      assert.equal(err.field, "id");
    } finally {
      e.close();
    }
  });

});

const KEYED = process.env.CELESTIAL_TEST_KEYED_ADDRESS;

describe("a live server with API keys", {
  skip: KEYED ? false : "CELESTIAL_TEST_KEYED_ADDRESS is not set",
}, () => {
  const keyed = (apiKey?: string) => new CelestialClient({ address: KEYED!, apiKey, timeoutMs: 20_000 });

  test("serverConfig: an admin key for every tenant reads the settings; no other key may", async () => {
    const admin = keyed(process.env.CELESTIAL_TEST_ADMIN_KEY);
    const writer = keyed(process.env.CELESTIAL_TEST_WRITE_KEY);
    const anonymous = keyed();
    try {
      const config = await admin.serverConfig();
      assert.ok(Object.keys(config).length > 10);
      for (const [name, s] of Object.entries(config)) {
        assert.equal(s.name, name);
        assert.ok(["flag", "env", "default"].includes(s.source), `${name}: ${s.source}`);
        assert.match(s.env, /^CELESTIAL_[A-Z0-9_]+$/, name);
      }
      // The server's own flags (its settings built in code), their values as JSON reads them.
      assert.deepEqual([config.rebalance_interval_s.value, config.rebalance_interval_s.source], [0, "flag"]);
      assert.equal(config.api_keys_file.source, "flag");
      assert.equal(typeof config.api_keys_file.value, "string");
      assert.ok(Array.isArray(config.zone_capacities.value));
      // A secret: "set", never its value.
      const secret = process.env.CELESTIAL_TEST_SECRET;
      assert.ok(secret);
      assert.deepEqual(config.qdrant_api_key, { name: "qdrant_api_key", value: "set", source: "flag",
        env: "CELESTIAL_QDRANT_API_KEY", secret: true });
      assert.ok(!JSON.stringify(config).includes(secret));
      await assert.rejects(writer.serverConfig(), (err: unknown) =>
        err instanceof CelestialError && err.code === "PERMISSION_DENIED");
      await assert.rejects(anonymous.serverConfig(), (err: unknown) =>
        err instanceof CelestialError && err.code === "UNAUTHENTICATED");
    } finally {
      admin.close();
      writer.close();
      anonymous.close();
    }
  });
});
