// Store a memory and recall it from Node.js, with the same .proto the server is built from.
//   node example.js [host:port]
// With keys and TLS (all optional):
//   CELESTIAL_API_KEY=cm_... CELESTIAL_TLS_CA=ca.pem \
//   CELESTIAL_TLS_CLIENT_CERT=client.pem CELESTIAL_TLS_CLIENT_KEY=client.key node example.js host:port
const fs = require("fs");
const path = require("path");
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");

const PROTO_ROOT = path.join(__dirname, "..", "..", "proto");
const definition = protoLoader.loadSync("celestial/v1/memory.proto", {
  includeDirs: [PROTO_ROOT],
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
});
const celestial = grpc.loadPackageDefinition(definition).celestial.v1;

const target = process.argv[2] || "localhost:50051";
const env = process.env;
const read = (file) => (file ? fs.readFileSync(file) : null);
const credentials = env.CELESTIAL_TLS_CA
  ? grpc.credentials.createSsl(
      read(env.CELESTIAL_TLS_CA), read(env.CELESTIAL_TLS_CLIENT_KEY),
      read(env.CELESTIAL_TLS_CLIENT_CERT))
  : grpc.credentials.createInsecure();
const client = new celestial.MemoryService(target, credentials);
const metadata = new grpc.Metadata();
if (env.CELESTIAL_API_KEY) metadata.set("authorization", `Bearer ${env.CELESTIAL_API_KEY}`);
const call = (method, request) =>
  new Promise((resolve, reject) =>
    client[method](request, metadata, { deadline: Date.now() + 30000 }, (err, resp) =>
      err ? reject(err) : resolve(resp)
    )
  );

async function main() {
  const tenant = "node-example";
  const stored = await call("Store", {
    tenant,
    content: "The Node.js team meets every Tuesday at 10am",
    importance: 0.7,
    tags: ["schedule"],
  });
  console.log(JSON.stringify({ stored: stored.memory.id, zone: stored.memory.zone }));
  const recalled = await call("Recall", { tenant, query: "When does the Node team meet?", limit: 3 });
  for (const r of recalled.results) {
    console.log(JSON.stringify({
      id: r.memory.id, zone: r.found_in, relevance: r.relevance, content: r.memory.content,
    }));
  }
  try {
    await call("Store", { tenant, content: "   " });
  } catch (err) {
    console.log(JSON.stringify({ error: grpc.status[err.code], details: err.details }));
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
