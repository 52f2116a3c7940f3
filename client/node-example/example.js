// Store a memory and recall it from Node.js with the @celestial-memory/client package.
//   npm install && node example.js [host:port]
// With keys and TLS (all optional):
//   CELESTIAL_API_KEY=cm_... CELESTIAL_TLS_CA=ca.pem \
//   CELESTIAL_TLS_CLIENT_CERT=client.pem CELESTIAL_TLS_CLIENT_KEY=client.key node example.js host:port
// package.json takes the package from ../typescript, which works inside this repository only;
// a copy elsewhere installs it from a tarball or a path instead (see README.md).
const fs = require("fs");
const { CelestialClient, CelestialError } = require("@celestial-memory/client");

const target = process.argv[2] || "localhost:50051";
const env = process.env;
const read = (file) => (file ? fs.readFileSync(file) : undefined);
const client = new CelestialClient({
  address: target,
  tenant: "node-example",
  apiKey: env.CELESTIAL_API_KEY || undefined,
  tls: env.CELESTIAL_TLS_CA
    ? { ca: read(env.CELESTIAL_TLS_CA), cert: read(env.CELESTIAL_TLS_CLIENT_CERT),
        key: read(env.CELESTIAL_TLS_CLIENT_KEY) }
    : undefined,
  timeoutMs: 30000,
});
// The client names zones "core" to "cloud"; the lines below print the proto's enum names
// (ZONE_CORE, ...), as grpcurl does, so that they read the same from any language.
const zoneName = (zone) => `ZONE_${zone.toUpperCase()}`;

async function main() {
  const { memory } = await client.store("The Node.js team meets every Tuesday at 10am", {
    importance: 0.7,
    tags: ["schedule"],
  });
  console.log(JSON.stringify({ stored: memory.id, zone: zoneName(memory.zone) }));
  const recalled = await client.recall("When does the Node team meet?", { limit: 3 });
  for (const r of recalled) {
    console.log(JSON.stringify({
      id: r.memory.id, zone: zoneName(r.foundIn), relevance: r.relevance, content: r.memory.content,
    }));
  }
  try {
    await client.store("   ");
  } catch (err) {
    if (!(err instanceof CelestialError)) throw err;
    console.log(JSON.stringify({ error: err.code, details: err.details, field: err.field }));
  }
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(() => client.close());
