// npm run build:explorer [-- --outfile PATH]: bundles explorer.ts (type-checked first by
// `tsc -p explorer/tsconfig.json`) into the server's explorer.js. The output depends only on the
// sources and the pinned esbuild: a fixed target, minified, no source map, no timestamps, so
// tests/integration/test_explorer_browser.py can check that the checked-in file is current.
import { build } from "esbuild";
import { fileURLToPath } from "node:url";
import { dirname, resolve } from "node:path";
import { parseArgs } from "node:util";

const here = dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({ options: { outfile: { type: "string" } } });
const outfile = resolve(values.outfile ??
  resolve(here, "../../../server/celestial_memory/api/explorer/explorer.js"));

await build({
  entryPoints: [resolve(here, "explorer.ts")],
  outfile,
  bundle: true,
  format: "iife",
  platform: "browser",
  target: "es2022",
  minify: true,
  sourcemap: false,
  charset: "ascii",
  legalComments: "none",
  logLevel: "warning",
  banner: { js: "// Celestial Memory explorer: built by `npm run build:explorer` in client/typescript" +
    " from explorer/explorer.ts; do not edit.\n// Bundles @bufbuild/protobuf, @connectrpc/connect" +
    " and @connectrpc/connect-web (Apache-2.0)." },
});
console.log(`wrote ${outfile}`);
