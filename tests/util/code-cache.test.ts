/**
 * src/util/code-cache.ts: CommonJS files run as require() runs them, compiled from the V8 code
 * cache beside them when it matches. Whether a cache is used is checked in a fresh process: within
 * one, V8 would find the code it compiled while writing the cache without reading the file.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  codeCachePathOf,
  codeCacheUse,
  requireWithCodeCache,
  writeCodeCache,
} from "../../src/util/code-cache.js";
import { loadInFreshNode } from "../helpers/fresh-load.js";

const LIB = `const doubled = require("./dep.cjs").value * 2;
exports.answer = () => doubled;
exports.where = () => [__filename, __dirname];
exports.fail = () => {
  throw new Error("boom");
};
`;

let dir: string;
let lib: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-code-cache-"));
  lib = join(dir, "lib.cjs");
  await writeFile(lib, LIB);
  await writeFile(join(dir, "dep.cjs"), "exports.value = 21;\n");
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

interface Lib {
  answer(): number;
  where(): string[];
  fail(): void;
}

/** Loads `file` in a fresh process: how it was compiled, and what it answers. */
async function loadInChild(file: string): Promise<{ use: string; answer?: unknown }> {
  return (await loadInFreshNode([file]))[0]!;
}

describe("requireWithCodeCache", () => {
  it("runs a CommonJS file as require() would: its exports, its own require, __filename, __dirname", () => {
    const loaded = requireWithCodeCache(lib) as Lib;
    expect(loaded.answer()).toBe(42);
    expect(loaded.where()).toEqual([lib, dir]);
    expect(codeCacheUse(lib)).toBe("none");
    // One load per file, as require() keeps one module: the same exports, the same classes.
    expect(requireWithCodeCache(pathToFileURL(lib))).toBe(loaded);
  });

  it("gives stack traces the file's own line numbers", () => {
    const loaded = requireWithCodeCache(lib) as Lib;
    expect(() => loaded.fail()).toThrow("boom");
    try {
      loaded.fail();
    } catch (err) {
      expect((err as Error).stack).toContain(`${lib}:5:`);
    }
  });

  it("compiles from the cache the build step wrote", async () => {
    expect((writeCodeCache(lib) as Lib).answer()).toBe(42);
    expect(await loadInChild(lib)).toEqual({ use: "used", answer: 42 });
  });

  it("compiles from source when the cache is damaged (V8 itself would crash on it)", async () => {
    writeCodeCache(lib);
    const cache = await readFile(codeCachePathOf(lib));
    for (let i = 64; i < cache.length; i += 97) cache[i]! ^= 0x5a;
    await writeFile(codeCachePathOf(lib), cache);
    expect(await loadInChild(lib)).toEqual({ use: "rejected", answer: 42 });

    await writeFile(codeCachePathOf(lib), cache.subarray(0, 5));
    expect(await loadInChild(lib)).toEqual({ use: "rejected", answer: 42 });
  });

  it("compiles from source when the file changed after the cache was written, even to the same length", async () => {
    writeCodeCache(lib);
    // V8 checks only the length: this cache would run the old code.
    await writeFile(lib, LIB.replace("value * 2", "value * 3"));
    expect(await loadInChild(lib)).toEqual({ use: "rejected", answer: 63 });
  });
});
