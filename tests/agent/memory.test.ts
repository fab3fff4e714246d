import { chmod, mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MemoryFiles, historyStamp } from "../../src/agent/memory.js";

let workspace: string;

beforeEach(async () => {
  workspace = await mkdtemp(join(tmpdir(), "palaver-memory-"));
});
afterEach(async () => {
  await rm(workspace, { recursive: true, force: true });
});

describe("MemoryFiles", () => {
  it("uses nanobot's paths", () => {
    const m = new MemoryFiles(workspace);
    expect(m.paths).toEqual({
      dir: join(workspace, "memory"),
      memory: join(workspace, "memory", "MEMORY.md"),
      history: join(workspace, "memory", "HISTORY.md"),
    });
  });

  it("reads an empty string when MEMORY.md is missing", async () => {
    expect(await new MemoryFiles(workspace).readMemory()).toBe("");
  });

  it("writes MEMORY.md whole, creating the folder, leaving no temp file", async () => {
    const m = new MemoryFiles(workspace);
    await m.writeMemory("# Memory\n\n- likes tea\n");
    await m.writeMemory("# Memory\n\n- likes coffee\n");
    expect(await m.readMemory()).toBe("# Memory\n\n- likes coffee\n");
    expect(await readdir(m.paths.dir)).toEqual(["MEMORY.md"]);
  });

  it("appends timestamped paragraphs to HISTORY.md", async () => {
    const m = new MemoryFiles(workspace);
    await m.appendHistory("Talked about the trip to Lyon.", new Date(2026, 2, 1, 9, 5));
    await m.appendHistory("  Booked the train.  \n", new Date(2026, 2, 1, 14, 30));
    await m.appendHistory("   "); // nothing to log
    expect(await readFile(m.paths.history, "utf8")).toBe(
      "[2026-03-01 09:05] Talked about the trip to Lyon.\n\n[2026-03-01 14:30] Booked the train.\n\n",
    );
  });

  it("keeps an entry's own stamp instead of adding a second one", async () => {
    const m = new MemoryFiles(workspace);
    await writeFile(join(workspace, "x"), ""); // unrelated file: the memory folder is made on demand
    await m.appendHistory("[2026-01-02 03:04] User asked about taxes.", new Date(2026, 5, 6, 7, 8));
    expect(await readFile(m.paths.history, "utf8")).toBe("[2026-01-02 03:04] User asked about taxes.\n\n");
  });

  it("formats the stamp in local time", () => {
    expect(historyStamp(new Date(2025, 11, 31, 23, 59))).toBe("[2025-12-31 23:59]");
  });
});

describe("MemoryFiles: owner-only files (issue 11)", () => {
  const mode = async (path: string) => (await stat(path)).mode & 0o777;

  it("creates memory/ 0700 and MEMORY.md and HISTORY.md 0600", async () => {
    const m = new MemoryFiles(workspace);
    await m.writeMemory("- likes tea\n");
    await m.appendHistory("Talked about tea.");
    expect(await mode(m.paths.dir)).toBe(0o700);
    expect(await mode(m.paths.memory)).toBe(0o600);
    expect(await mode(m.paths.history)).toBe(0o600);
  });

  it("makes files an older version left 0644 private", async () => {
    const m = new MemoryFiles(workspace);
    await mkdir(m.paths.dir);
    await writeFile(m.paths.memory, "old\n", { mode: 0o644 });
    await writeFile(m.paths.history, "old\n\n", { mode: 0o644 });
    await chmod(m.paths.memory, 0o644);
    await chmod(m.paths.history, 0o644);
    await m.writeMemory("new\n");
    await m.appendHistory("Another entry.");
    expect(await mode(m.paths.memory)).toBe(0o600);
    expect(await mode(m.paths.history)).toBe(0o600);
    expect(await readFile(m.paths.history, "utf8")).toMatch(/^old\n\n\[.*\] Another entry\.\n\n$/);
  });
});
