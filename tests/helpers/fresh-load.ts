/**
 * Loading CommonJS files with src/util/code-cache.ts in a fresh node, to see whether their code
 * caches are used: within one process V8 would reuse the code it compiled while writing a cache,
 * without reading the file. tsx only compiles the loader's TypeScript; it sets no V8 flags (which
 * would make V8 refuse a cache).
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import type { CodeCacheUse } from "../../src/util/code-cache.js";
import { ROOT, TSX } from "./cli.js";

const LOADER = pathToFileURL(join(ROOT, "src", "util", "code-cache.ts")).href;

/** For each file: how it was compiled, and what its exported `answer()` returns when it has one. */
export async function loadInFreshNode(files: string[]): Promise<{ use: CodeCacheUse; answer?: unknown }[]> {
  const script = `import { codeCacheUse, requireWithCodeCache } from ${JSON.stringify(LOADER)};
const files = ${JSON.stringify(files)};
const loaded = files.map((file) => requireWithCodeCache(file));
console.log(JSON.stringify(files.map((file, i) => ({ use: codeCacheUse(file), answer: loaded[i].answer?.() }))));
process.exit(0); // a package may leave handles open`;
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ["--import", TSX, "--input-type=module", "--eval", script],
    { cwd: ROOT, timeout: 60_000 },
  );
  return JSON.parse(stdout) as { use: CodeCacheUse; answer?: unknown }[];
}
