/**
 * The build in dist/ (scripts/build-server.mjs: what `npm start` and the systemd unit run, and what
 * every child-process test runs): rebuilt with `npm run build` when a source is newer. Vitest's
 * global setup (tests/global-setup.ts) calls ensureBuilt() once before any test file runs; the
 * benchmarks call it themselves.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(import.meta.dirname, "..", "..");

/**
 * The build under test. BENCH_DIST_MAIN names another build's main.js (e.g. an older commit's,
 * built elsewhere) to compare against on the same machine at the same load; it is used as is.
 */
export const DIST_MAIN = process.env.BENCH_DIST_MAIN ?? join(ROOT, "dist", "main.js");

/** The newest modification time of the files under `dir` whose names end with `suffix` (ms). */
export function newestMtime(dir: string, suffix = ""): number {
  let newest = 0;
  for (const name of readdirSync(dir, { recursive: true, encoding: "utf8" })) {
    if (!name.endsWith(suffix)) continue;
    newest = Math.max(newest, statSync(join(dir, name)).mtimeMs);
  }
  return newest;
}

/**
 * Makes sure dist/ is built from the current sources (npm run build when a
 * source is newer). Returns why it could not, or null when dist is usable.
 */
export function ensureBuilt(): string | null {
  if (process.env.BENCH_DIST_MAIN) return existsSync(DIST_MAIN) ? null : `${DIST_MAIN} does not exist`;
  const stale = !existsSync(DIST_MAIN) || newestMtime(join(ROOT, "src"), ".ts") > statSync(DIST_MAIN).mtimeMs;
  if (!stale) return null;
  const build = spawnSync("npm", ["run", "build"], { cwd: ROOT, encoding: "utf8", timeout: 120_000 });
  if (build.status === 0 && existsSync(DIST_MAIN)) return null;
  return `npm run build failed (${build.status}): ${(build.stdout + build.stderr).trim().slice(-500)}`;
}
