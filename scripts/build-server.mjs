#!/usr/bin/env node
/**
 * Builds the daemon (src/main.ts) into dist/: palaver's own sources, bundled by esbuild as ES
 * modules. npm packages are not bundled: every `import "grammy"` stays as written and Node resolves
 * it from node_modules at run time, as it does for the sources under tsx.
 *   dist/main.js                       the entry (checks the Node version, then imports the CLI)
 *   dist/<dir>/<name>-<hash>.js        what a dynamic import() loads, beside its source's folder
 *                                      (dist/channels/telegram/adapter-….js: each platform's adapter,
 *                                      loaded only when the configuration enables it)
 *   dist/chunk-<hash>.js               code those share
 *   dist/**.map                        source maps (NODE_OPTIONS=--enable-source-maps shows them in stacks)
 * Types are checked by `npm run typecheck`, not here. Usage: node scripts/build-server.mjs [outDir]
 */
import { readdir, rm } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** Files of an earlier build go (not dist/web/, the page, built by build-web.mjs). */
async function clean(outDir) {
  const names = await readdir(outDir).catch(() => []);
  await Promise.all(
    names.filter((n) => n !== "web").map((n) => rm(join(outDir, n), { recursive: true, force: true })),
  );
}

/** Builds into `outDir` and returns the JavaScript files written (paths relative to the root). */
export async function buildServer(outDir = join(ROOT, "dist")) {
  await clean(outDir);
  const result = await build({
    entryPoints: [join(ROOT, "src", "main.ts")],
    outdir: outDir,
    outbase: join(ROOT, "src"),
    bundle: true,
    packages: "external",
    platform: "node",
    target: "node22",
    format: "esm",
    splitting: true,
    chunkNames: "[dir]/[name]-[hash]",
    sourcemap: "linked",
    logLevel: "warning",
    metafile: true,
  });
  return Object.keys(result.metafile.outputs).filter((name) => name.endsWith(".js"));
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const outDir = process.argv[2] ? resolve(process.argv[2]) : undefined;
  const files = await buildServer(outDir);
  console.log(`server: ${files.length} files in ${outDir ?? "dist"}`);
}
