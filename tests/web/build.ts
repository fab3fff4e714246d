/**
 * dist/web for the browser tests and the web bench: built with scripts/build-web.mjs when it is
 * missing or older than a file under web/ (so a test never runs an old page).
 */
import { spawnSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../helpers/cli.js";
import { newestMtime } from "../helpers/dist.js";

export const WEB_DIST = join(ROOT, "dist", "web");
const WEB_SRC = join(ROOT, "web");

/** Builds the page if needed; throws with the build's output when it fails. */
export function ensureWebBuilt(): void {
  const index = join(WEB_DIST, "index.html");
  // A build from before the compressed copies (.br, .gz) were written is rebuilt too.
  const built =
    existsSync(index) && existsSync(`${index}.br`) && statSync(index).mtimeMs >= newestMtime(WEB_SRC);
  if (built) return;
  const run = spawnSync(process.execPath, [join(ROOT, "scripts", "build-web.mjs")], {
    cwd: ROOT,
    encoding: "utf8",
    timeout: 120_000,
  });
  if (run.status !== 0) {
    throw new Error(`scripts/build-web.mjs failed (${run.status}):\n${run.stdout}${run.stderr}`);
  }
}
