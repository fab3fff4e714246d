import { chmod, mkdir, readdir, readFile, stat, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { CronStore, parseStore, serialize, type StoreSnapshot } from "../../src/cron/store.js";
import type { CronJob } from "../../src/cron/types.js";
import { captureLog, silentLog, TempDirs } from "./helpers.js";

const temps = new TempDirs();
afterEach(() => temps.cleanup());

function job(id: string, overrides: Partial<CronJob> = {}): CronJob {
  return {
    id,
    name: `job ${id}`,
    enabled: true,
    schedule: { kind: "every", atMs: null, everyMs: 60_000, expr: null, tz: null },
    payload: { kind: "agent_turn", message: "hi", deliver: true, channel: "telegram", to: "42" },
    state: { nextRunAtMs: 1_000, lastRunAtMs: null, lastStatus: null, lastError: null },
    createdAtMs: 1,
    updatedAtMs: 1,
    deleteAfterRun: false,
    ...overrides,
  };
}

async function storeIn(): Promise<{ store: CronStore; dir: string; path: string }> {
  const dir = await temps.make();
  const path = join(dir, "cron", "jobs.json");
  return { store: new CronStore(path, { log: silentLog() }), dir, path };
}

describe("CronStore", () => {
  it("a missing file is an empty list; a write round-trips in nanobot's shape", async () => {
    const { store, path } = await storeIn();
    expect((await store.read()).jobs).toEqual([]);
    const snapshot: StoreSnapshot = { version: 1, jobs: [job("a1b2c3d4")], invalid: [], extra: {} };
    await store.write(snapshot);
    const onDisk = JSON.parse(await readFile(path, "utf8")) as {
      version: number;
      jobs: Record<string, unknown>[];
    };
    expect(onDisk.version).toBe(1);
    expect(onDisk.jobs[0]).toMatchObject({
      id: "a1b2c3d4",
      schedule: { kind: "every", everyMs: 60_000, atMs: null },
      payload: { kind: "agent_turn", deliver: true, channel: "telegram", to: "42" },
      state: { nextRunAtMs: 1_000, lastStatus: null },
      deleteAfterRun: false,
    });
    expect((await store.read()).jobs).toEqual([job("a1b2c3d4")]);
  });

  it("writes atomically: no temp or lock files are left behind", async () => {
    const { store, dir } = await storeIn();
    for (let i = 0; i < 5; i++) {
      await store.update((snap) => {
        snap.jobs.push(job(`id${i}`));
      });
    }
    expect(await readdir(join(dir, "cron"))).toEqual(["jobs.json"]);
    expect((await store.read()).jobs.map((j) => j.id)).toEqual(["id0", "id1", "id2", "id3", "id4"]);
  });

  it("does not rewrite the file when a change changes nothing", async () => {
    const { store } = await storeIn();
    await store.update((snap) => void snap.jobs.push(job("x")));
    const before = await store.signature();
    const { result } = await store.update(() => "nothing");
    expect(result).toBe("nothing");
    expect(await store.signature()).toBe(before);
  });

  it("sets a corrupt file aside, logs it and starts empty", async () => {
    const { dir, path } = await storeIn();
    const { log, lines } = captureLog();
    const store = new CronStore(path, { log });
    await store.write({ version: 1, jobs: [], invalid: [], extra: {} });
    await writeFile(path, '{"version": 1, "jobs": [ {"id": ');
    expect((await store.read()).jobs).toEqual([]);
    const files = await readdir(join(dir, "cron"));
    const aside = files.find((f) => f.startsWith("jobs.json.corrupt-"));
    expect(aside).toBeDefined();
    expect(await readFile(join(dir, "cron", aside!), "utf8")).toBe('{"version": 1, "jobs": [ {"id": ');
    expect(files).not.toContain("jobs.json");
    expect(lines.some((l) => l.level === 50 && String(l.msg).includes("set aside"))).toBe(true);
    // And the store works again.
    await store.update((snap) => void snap.jobs.push(job("fresh")));
    expect((await store.read()).jobs.map((j) => j.id)).toEqual(["fresh"]);
  });

  it("skips invalid jobs with a warning but keeps them in the file", async () => {
    const { path } = await storeIn();
    const { log, lines } = captureLog();
    const store = new CronStore(path, { log });
    const bad = [
      { id: "badcron1", name: "x", schedule: { kind: "cron", expr: "99 * * * *" }, payload: {} },
      { id: "badkind1", name: "y", schedule: { kind: "sometimes" } },
      { id: "badzone1", name: "z", schedule: { kind: "cron", expr: "0 9 * * *", tz: "Moon/Base" } },
    ];
    await store.write({ version: 1, jobs: [job("good0001")], invalid: bad, extra: {} });
    const snap = await store.read();
    expect(snap.jobs.map((j) => j.id)).toEqual(["good0001"]);
    const warnings = lines.filter((l) => l.level === 40);
    expect(warnings.map((w) => w.id)).toEqual(["badcron1", "badkind1", "badzone1"]);
    expect(String(warnings[2]!.problem)).toContain('unknown timezone "Moon/Base"');
    // A change keeps what it could not read.
    await store.update((s) => void s.jobs.push(job("new00001")));
    const onDisk = JSON.parse(await readFile(path, "utf8")) as { jobs: { id: string }[] };
    expect(onDisk.jobs.map((j) => j.id).sort()).toEqual([
      "badcron1",
      "badkind1",
      "badzone1",
      "good0001",
      "new00001",
    ]);
    // Warned once per entry, not on every read.
    await store.read();
    expect(lines.filter((l) => l.level === 40)).toHaveLength(3);
  });

  it("keeps a copy of each invalid job, once, in jobs.json.corrupt (0600); files and folder are private", async () => {
    const { path } = await storeIn();
    const bad = [{ id: 7, schedule: { kind: "every", everyMs: 1000 } }, "not a job", { id: "nosched1" }];
    await new CronStore(path, { log: silentLog() }).write({
      version: 1,
      jobs: [job("good0001")],
      invalid: bad,
      extra: {},
    });
    await new CronStore(path, { log: silentLog() }).read();
    // Another process (a restart) reads it again: nothing is added twice.
    await new CronStore(path, { log: silentLog() }).read();
    const corrupt = `${path}.corrupt`;
    const kept = (await readFile(corrupt, "utf8")).split("\n").filter(Boolean);
    expect(kept.map((l) => JSON.parse(l) as unknown)).toEqual(bad);
    const mode = async (p: string) => (await stat(p)).mode & 0o777;
    expect(await mode(corrupt)).toBe(0o600);
    expect(await mode(path)).toBe(0o600);
    expect(await mode(dirname(path))).toBe(0o700);
  });

  it("a set-aside document is private too, even if it was written by hand 0644", async () => {
    const { dir, path } = await storeIn();
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, "not json at all", { mode: 0o644 });
    await chmod(path, 0o644);
    expect((await new CronStore(path, { log: silentLog() }).read()).jobs).toEqual([]);
    const aside = (await readdir(join(dir, "cron"))).find((f) => f.startsWith("jobs.json.corrupt-"));
    expect((await stat(join(dir, "cron", aside!))).mode & 0o777).toBe(0o600);
  });

  it("reads nanobot's files: snake_case keys, nulls, numeric chat ids, unknown keys kept", () => {
    const text = JSON.stringify({
      version: 1,
      jobs: [
        {
          id: "0a1b2c3d",
          name: "standup",
          enabled: true,
          schedule: { kind: "cron", at_ms: null, every_ms: null, expr: "0 9 * * 1-5", tz: "Europe/Berlin" },
          payload: { kind: "agent_turn", message: "standup", deliver: true, channel: "telegram", to: 12345 },
          state: {
            next_run_at_ms: 1700000000000,
            last_run_at_ms: null,
            last_status: null,
            last_error: null,
            run_history: [],
          },
          created_at_ms: 1,
          updated_at_ms: 2,
          delete_after_run: false,
        },
      ],
    });
    const parsed = parseStore(text);
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    const [j] = parsed.snapshot.jobs;
    expect(j).toMatchObject({
      id: "0a1b2c3d",
      schedule: { kind: "cron", expr: "0 9 * * 1-5", tz: "Europe/Berlin" },
      payload: { to: "12345" },
      state: { nextRunAtMs: 1700000000000, runHistory: [] },
      createdAtMs: 1,
      updatedAtMs: 2,
    });
    expect(serialize(parsed.snapshot)).toContain('"runHistory": []');
  });

  it("never loses a job when two stores (two processes) change the file at the same time", async () => {
    const { path } = await storeIn();
    const a = new CronStore(path, { log: silentLog() });
    const b = new CronStore(path, { log: silentLog() });
    await Promise.all(
      Array.from({ length: 15 }, (_, i) => [
        a.update((s) => void s.jobs.push(job(`a${i}`))),
        b.update((s) => void s.jobs.push(job(`b${i}`))),
      ]).flat(),
    );
    expect((await a.read()).jobs).toHaveLength(30);
  });

  it("takes over a lock left by a dead process, and waits for (then gives up on) a live one", async () => {
    const { path } = await storeIn();
    const store = new CronStore(path, { log: silentLog(), lockTimeoutMs: 150 });
    await store.write({ version: 1, jobs: [], invalid: [], extra: {} });
    await writeFile(`${path}.lock`, "999999999");
    await store.update((s) => void s.jobs.push(job("after1")));
    expect((await store.read()).jobs.map((j) => j.id)).toEqual(["after1"]);

    await writeFile(`${path}.lock`, String(process.ppid));
    await expect(store.update((s) => void s.jobs.push(job("never")))).rejects.toThrow(
      /locked by another process/,
    );
    expect((await store.read()).jobs.map((j) => j.id)).toEqual(["after1"]);
  });
});
