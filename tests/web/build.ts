/**
 * dist/web for the browser tests and the web bench: built with scripts/build-web.mjs when it is
 * missing or older than a file under web/ (so a test never runs an old page).
 */
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../helpers/cli.js";

export const WEB_DIST = join(ROOT, "dist", "web");
const WEB_SRC = join(ROOT, "web");

function newest(dir: string): number {
  let at = 0;
  for (const name of readdirSync(dir, { recursive: true, encoding: "utf8" })) {
    at = Math.max(at, statSync(join(dir, name)).mtimeMs);
  }
  return at;
}

/** Builds the page if needed; throws with the build's output when it fails. */
export function ensureWebBuilt(): void {
  const index = join(WEB_DIST, "index.html");
  if (existsSync(index) && statSync(index).mtimeMs >= newest(WEB_SRC)) return;
  const run = spawnSync(process.execPath, [join(ROOT, "scripts", "build-web.mjs")], {
    cwd: ROOT,
    encoding: "utf8",
    timeout: 120_000,
  });
  if (run.status !== 0) {
    throw new Error(`scripts/build-web.mjs failed (${run.status}):\n${run.stdout}${run.stderr}`);
  }
}
