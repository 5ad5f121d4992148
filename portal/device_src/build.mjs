// Bundles the device page (main.ts) and @hashee/sdk (../../sdk-js/src, compiled from source so
// the page always runs the SDK of this commit) into one minified ES module, a static file of
// the portal. Deterministic: same lockfiles, same bytes (no timestamp, no absolute path).
//   node build.mjs           write ../static/portal/device/device.js
//   node build.mjs --check   fail if the committed file differs from a fresh build
import { build } from "esbuild";
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

const here = dirname(fileURLToPath(import.meta.url));
const outfile = resolve(here, "../static/portal/device/device.js");
const LIMIT_GZIP = 150 * 1024;

const result = await build({
  entryPoints: [resolve(here, "src/main.ts")],
  absWorkingDir: here,
  alias: { "@hashee/sdk": resolve(here, "../../sdk-js/src/index.ts") },
  bundle: true,
  format: "esm",
  platform: "browser",
  target: ["es2022"],
  minify: true,
  keepNames: true, // the SDK names its errors after their classes (SdkError.name)
  legalComments: "eof",
  charset: "utf8",
  write: false,
  logLevel: "warning",
});
const bytes = result.outputFiles[0].contents;
const gzipped = gzipSync(bytes, { level: 9 }).length;
const size = `${(bytes.length / 1024).toFixed(1)} KiB, ${(gzipped / 1024).toFixed(1)} KiB gzipped`;
if (gzipped > LIMIT_GZIP) {
  console.error(`device.js is ${size}: over the 150 KiB (gzipped) budget`);
  process.exit(1);
}
if (process.argv.includes("--check")) {
  let committed;
  try {
    committed = readFileSync(outfile);
  } catch {
    committed = Buffer.alloc(0);
  }
  if (!committed.equals(Buffer.from(bytes))) {
    console.error("portal/static/portal/device/device.js is not the build of its sources: "
      + "run `npm run build` in portal/device_src and commit the result");
    process.exit(1);
  }
  console.log(`device.js matches its sources (${size})`);
} else {
  mkdirSync(dirname(outfile), { recursive: true });
  writeFileSync(outfile, bytes);
  console.log(`wrote portal/static/portal/device/device.js (${size})`);
}
