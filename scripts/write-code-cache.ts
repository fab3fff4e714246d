/**
 * Build step of scripts/build-server.mjs: writes the V8 code cache of each CommonJS file named
 * (src/util/code-cache.ts, which also reads it), and prints, as JSON, the names each part of each
 * file's exports has: { [file]: { [package]: string[] } }. Usage: node --import tsx scripts/write-code-cache.ts <file>...
 */
import { writeCodeCache } from "../src/util/code-cache.js";

const names: Record<string, Record<string, string[]>> = {};
for (const file of process.argv.slice(2)) {
  const parts = writeCodeCache(file) as Record<string, object>;
  names[file] = Object.fromEntries(Object.entries(parts).map(([name, part]) => [name, Object.keys(part)]));
}
process.stdout.write(JSON.stringify(names));
// The SDKs may have left handles open (timers, the global dispatcher): the build waits for none.
process.exit(0);
