/**
 * CommonJS files run as require() runs them, but compiled from V8's code cache when one lies beside
 * them (`<file>.cache`). The build (scripts/build-server.mjs) bundles the packages palaver uses
 * into a few such files (each chat platform's SDK; those every start loads) and writes each
 * one's cache after loading it once, so the cache holds every function the load compiled. Node 20
 * offers no code cache for ES modules (Node ≥ 22.1 has module.enableCompileCache); compiling the
 * three platforms' SDKs from source was about half of loading them (bench/README.md).
 *
 * The cache is only ever a shortcut. V8 checks that it was made by the same V8 version, with the
 * same flags, for source of the same length, and compiles from source when not (a Node upgrade
 * without a rebuild costs the start that time, nothing else); it does not check the rest: a
 * damaged cache with an intact header crashes the process (a segfault, tried), and a cache made for
 * other source of the same length runs that other source's code (tried too). So the cache file
 * starts with CRC-32s of the source and of the cache (HEADER_BYTES), and is used only when both match.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { Script, constants } from "node:vm";
import { crc32 } from "node:zlib";

/** How a file was compiled: from its cache, from source after V8 refused the cache, or without one. */
export type CodeCacheUse = "used" | "rejected" | "none";

interface Loaded {
  exports: unknown;
  cache: CodeCacheUse;
}

/** One load per file, as require() keeps one module per file: its classes stay the same classes. */
const loaded = new Map<string, Loaded>();

/** The cache file of a CommonJS file. */
export function codeCachePathOf(file: string): string {
  return `${file}.cache`;
}

/** Runs `file` (a path or file: URL) once and returns its module.exports. */
export function requireWithCodeCache(file: string | URL): unknown {
  const path = pathOf(file);
  let entry = loaded.get(path);
  if (!entry) {
    const source = readFileSync(path);
    const cache = readCache(path, source);
    const script = compile(path, source, cache instanceof Buffer ? cache : undefined);
    const rejected = cache === "damaged" || script.cachedDataRejected === true;
    entry = {
      exports: run(script, path),
      cache: cache === undefined ? "none" : rejected ? "rejected" : "used",
    };
    loaded.set(path, entry);
  }
  return entry.exports;
}

/** How the file was compiled, once requireWithCodeCache has run it (for tests and diagnostics). */
export function codeCacheUse(file: string | URL): CodeCacheUse | undefined {
  return loaded.get(pathOf(file))?.cache;
}

function pathOf(file: string | URL): string {
  return typeof file === "string" ? file : fileURLToPath(file);
}

/**
 * Build step: runs `file` and writes its code cache, made after the run so that it holds the
 * functions loading compiled, not only the top level. Returns module.exports.
 */
export function writeCodeCache(file: string): unknown {
  const source = readFileSync(file);
  const script = compile(file, source, undefined);
  const exports = run(script, file);
  const data = script.createCachedData();
  const header = Buffer.alloc(HEADER_BYTES);
  header.writeUInt32LE(crc32(source), 0);
  header.writeUInt32LE(crc32(data), 4);
  writeFileSync(codeCachePathOf(file), Buffer.concat([header, data]));
  return exports;
}

/** The cache file's header: CRC-32 of the source file, then of the cache data after the header. */
const HEADER_BYTES = 8;

/**
 * The wrapper CommonJS code runs in. Its own line, with lineOffset -1, so stack traces give the
 * file's own line and column numbers. The cache matches only this exact text: writer and reader
 * both come through here.
 */
const HEAD = "(function (exports, require, module, __filename, __dirname) {\n";
const TAIL = "\n})";

function compile(path: string, source: Buffer, cachedData: Buffer | undefined): Script {
  return new Script(HEAD + source.toString("utf8") + TAIL, {
    filename: path,
    lineOffset: -1,
    ...(cachedData ? { cachedData } : {}),
    // An import() inside the file resolves as it would in a module of the main program.
    importModuleDynamically: constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  });
}

function run(script: Script, path: string): unknown {
  const module = { exports: {} as unknown };
  const wrapper = script.runInThisContext() as (...args: unknown[]) => void;
  wrapper.call(module.exports, module.exports, createRequire(path), module, path, dirname(path));
  return module.exports;
}

/** The cache data for this source; "damaged" when the file is there but does not match. */
function readCache(path: string, source: Buffer): Buffer | "damaged" | undefined {
  let file: Buffer;
  try {
    file = readFileSync(codeCachePathOf(path));
  } catch {
    return undefined; // no cache (or an unreadable one): compiled from source
  }
  const data = file.subarray(HEADER_BYTES);
  const intact =
    file.length > HEADER_BYTES &&
    file.readUInt32LE(0) === crc32(source) &&
    file.readUInt32LE(4) === crc32(data);
  return intact ? data : "damaged";
}
