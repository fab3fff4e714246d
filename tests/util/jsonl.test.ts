import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import * as z from "zod";
import { readJsonl } from "../../src/util/jsonl.js";
import { captureLog } from "../helpers/log.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-jsonl-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const Row = z.object({ n: z.number() });

describe("readJsonl", () => {
  it("returns the valid lines and keeps bad JSON and wrong shapes in <file>.corrupt", async () => {
    const path = join(dir, "rows.jsonl");
    await writeFile(path, ['{"n":1}', "not json", '{"n":"two"}', "", '{"n":3}\r', '{"n":4'].join("\n"));
    const { log, lines } = captureLog();
    const result = readJsonl(path, Row, { log, what: "rows" });
    expect(result.values).toEqual([{ n: 1 }, { n: 3 }]);
    expect(result.skipped).toBe(3);
    expect(await readFile(`${path}.corrupt`, "utf8")).toBe('not json\n{"n":"two"}\n{"n":4\n');
    const warned = lines.filter((l) => l.msg === "rows: skipping a bad line");
    expect(warned.map((l) => l.line)).toEqual([2, 3, 6]);
    expect(String(warned[1]!.problem)).toContain("wrong shape: n");
  });

  it("keeps each bad line once when the same file is read again", async () => {
    const path = join(dir, "rows.jsonl");
    await writeFile(path, '{"n":1}\n{"x":1}\n');
    const { log } = captureLog();
    readJsonl(path, Row, { log });
    readJsonl(path, Row, { log });
    expect(await readFile(`${path}.corrupt`, "utf8")).toBe('{"x":1}\n');
  });

  it("treats a missing file as empty and leaves no .corrupt file for a clean one", async () => {
    const { log } = captureLog();
    expect(readJsonl(join(dir, "none.jsonl"), Row, { log })).toEqual({ values: [], skipped: 0 });
    const path = join(dir, "ok.jsonl");
    await writeFile(path, '{"n":1}\n');
    expect(readJsonl(path, Row, { log }).values).toEqual([{ n: 1 }]);
    await expect(readFile(`${path}.corrupt`)).rejects.toThrow();
  });
});
