/**
 * The scheduler with fake timers (setTimeout and Date; file I/O stays real):
 * `advance` moves the clock and then waits for the service's queued work.
 */
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { SYSTEM_CHANNEL, type InboundMessage } from "../../src/bus/types.js";
import { buildSchedule } from "../../src/cron/schedule.js";
import {
  CRON_SESSION_PREFIX,
  CronService,
  MAX_TIMER_MS,
  type AddJobInput,
  type CronServiceOptions,
} from "../../src/cron/service.js";
import { gatewayJobs, terminalJobs } from "../../src/cron/targets.js";
import { CronStore } from "../../src/cron/store.js";
import type { CronJob } from "../../src/cron/types.js";
import { SessionStore, safeKey } from "../../src/sessions/store.js";
import { captureLog, silentLog, TempDirs } from "./helpers.js";

const temps = new TempDirs();
const START = Date.parse("2025-06-02T08:00:00Z");
const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;

let storePath: string;
let published: InboundMessage[];
const services: CronService[] = [];

function makeService(
  opts: {
    maxCatchUp?: number;
    log?: ReturnType<typeof silentLog>;
    runs?: CronServiceOptions["runs"];
    announce?: boolean;
    sink?: InboundMessage[];
  } = {},
): CronService {
  const sink = opts.sink ?? published;
  const service = new CronService({
    storePath,
    bus: { publishInbound: (msg) => sink.push(msg) },
    maxCatchUp: opts.maxCatchUp ?? 5,
    log: opts.log ?? silentLog(),
    pollIntervalMs: 2000,
    ...(opts.runs ? { runs: opts.runs } : {}),
    ...(opts.announce !== undefined ? { announce: opts.announce } : {}),
  });
  services.push(service);
  return service;
}

/** Moves the fake clock, then lets the service finish what the timers started. */
async function advance(ms: number): Promise<void> {
  await vi.advanceTimersByTimeAsync(ms);
  // Work done after real file I/O may arm a timer that is already due: run those too.
  for (let i = 0; i < 3; i++) {
    for (const s of services) await s.idle();
    await vi.advanceTimersByTimeAsync(0);
  }
  for (const s of services) await s.idle();
}

async function onDisk(): Promise<CronJob[]> {
  return (await new CronStore(storePath, { log: silentLog() }).read()).jobs;
}

function input(req: Parameters<typeof buildSchedule>[0], extra: Partial<AddJobInput> = {}): AddJobInput {
  const { schedule, deleteAfterRun } = buildSchedule(req, Date.now());
  return {
    message: "drink water",
    schedule,
    deleteAfterRun,
    channel: "slack",
    to: "C1",
    threadId: "111.222",
    metadata: { channelType: "channel" },
    ...extra,
  };
}

beforeEach(async () => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
  vi.setSystemTime(START);
  storePath = join(await temps.make(), "cron", "jobs.json");
  published = [];
});
afterEach(async () => {
  for (const s of services.splice(0)) await s.stop();
  vi.useRealTimers();
  await temps.cleanup();
});

describe("CronService firing", () => {
  it("an `at` job fires once, at its time, as a system message for its chat, then is deleted", async () => {
    const service = makeService();
    await service.start();
    const job = await service.add(input({ at: "2025-06-02T08:05:00Z" }, { sessionKey: "slack:C1:111.222" }));
    expect(job.id).toMatch(/^[0-9a-f]{8}$/);
    expect(job.deleteAfterRun).toBe(true);

    await advance(5 * MIN - 1);
    expect(published).toHaveLength(0);
    await advance(1);
    expect(published).toEqual([
      {
        channel: SYSTEM_CHANNEL,
        senderId: "cron",
        chatId: "slack:C1",
        sessionKey: `cron:${job.id}`,
        content:
          `[Scheduled task "drink water" (job ${job.id})]\ndrink water\n\n` +
          "Do this now and reply to the user with the result; for a plain reminder just remind them.",
        metadata: {
          cronJobId: job.id,
          origin: {
            channel: "slack",
            chatId: "C1",
            sessionKey: "slack:C1:111.222",
            threadId: "111.222",
            metadata: { channelType: "channel" },
          },
        },
      },
    ]);
    expect(await onDisk()).toEqual([]);
    await advance(DAY);
    expect(published).toHaveLength(1);
  });

  it("an `every` job fires repeatedly and records each run", async () => {
    const service = makeService();
    await service.start();
    const job = await service.add(input({ everySeconds: 60 }));
    for (let i = 1; i <= 3; i++) {
      await advance(MIN);
      expect(published).toHaveLength(i);
    }
    const [stored] = await onDisk();
    expect(stored!.id).toBe(job.id);
    // The thread is a payload field of its own; the metadata keeps only the channel's own bits.
    expect(stored!.payload).toMatchObject({ threadId: "111.222", metadata: { channelType: "channel" } });
    expect(stored!.state).toMatchObject({
      lastRunAtMs: START + 3 * MIN,
      lastStatus: "ok",
      lastError: null,
      nextRunAtMs: START + 4 * MIN,
    });
    expect(await service.nextJobsFor("slack", "C1", 3)).toEqual([
      { id: job.id, description: "drink water", nextRunAt: new Date(START + 4 * MIN) },
    ]);
    expect(await service.nextJobsFor("slack", "C2", 3)).toEqual([]);
  });

  it("a cron job with a time zone fires at 09:00 in that zone, across a DST change", async () => {
    vi.setSystemTime(Date.parse("2025-03-29T12:00:00Z"));
    const service = makeService();
    await service.start();
    await service.add(input({ cronExpr: "0 9 * * *", tz: "Europe/Paris" }));
    // Sunday 30 March: Paris is on UTC+2 from 01:00Z, so 09:00 is 07:00Z.
    const due = Date.parse("2025-03-30T07:00:00Z");
    await advance(due - Date.now() - 1);
    expect(published).toHaveLength(0);
    await advance(1);
    expect(published).toHaveLength(1);
    expect((await onDisk())[0]!.state.nextRunAtMs).toBe(Date.parse("2025-03-31T07:00:00Z"));
  });

  it("re-arms waits longer than setTimeout allows in chunks (no early fire)", async () => {
    const service = makeService();
    await service.start();
    await service.add(input({ at: "2025-07-02T08:00:00Z" })); // 30 days: more than 2^31-1 ms
    // An unchunked timer would overflow and fire at once.
    await advance(MAX_TIMER_MS + 1000);
    expect(published).toHaveLength(0);
    await advance(30 * DAY - (MAX_TIMER_MS + 1000) - 1);
    expect(published).toHaveLength(0);
    await advance(1);
    expect(published).toHaveLength(1);
  });

  it("run(id) fires now; remove(id) only removes the job of the given chat", async () => {
    const service = makeService();
    await service.start();
    const job = await service.add(input({ everySeconds: 3600 }));
    await service.run(job.id);
    expect(published).toHaveLength(1);
    expect((await onDisk())[0]!.state).toMatchObject({ lastStatus: "ok", nextRunAtMs: START + HOUR });
    await expect(service.run("nope1234")).rejects.toThrow("no cron job with id nope1234");

    expect(await service.remove(job.id, { channel: "slack", chatId: "OTHER" })).toBe(false);
    expect(await service.remove(job.id, { channel: "slack", chatId: "C1" })).toBe(true);
    expect(await onDisk()).toEqual([]);
    await advance(2 * HOUR);
    expect(published).toHaveLength(1);
  });

  it("remove(id) deletes the job's session file and leaves the others (issue 13)", async () => {
    const sessionsDir = await temps.make();
    const service = new CronService({
      storePath,
      bus: { publishInbound: (msg) => published.push(msg) },
      maxCatchUp: 5,
      log: silentLog(),
      sessions: new SessionStore(sessionsDir),
    });
    services.push(service);
    const job = await service.add(input({ everySeconds: 3600 }));
    const kept = await service.add(input({ everySeconds: 7200 }));
    const fileOf = (id: string) => join(sessionsDir, `${safeKey(CRON_SESSION_PREFIX + id)}.jsonl`);
    await writeFile(fileOf(job.id), "{}\n");
    await writeFile(fileOf(kept.id), "{}\n");
    await writeFile(join(sessionsDir, "slack_C1.jsonl"), "{}\n");

    expect(await service.remove(job.id)).toBe(true);
    expect((await readdir(sessionsDir)).sort()).toEqual([`cron_${kept.id}.jsonl`, "slack_C1.jsonl"].sort());
    // A job that never ran has no session file: removing it is not an error.
    await rm(fileOf(kept.id));
    expect(await service.remove(kept.id)).toBe(true);
    expect(await onDisk()).toEqual([]);
  });

  it("a session that cannot be deleted leaves the job removed and logs what failed", async () => {
    const sessionsDir = await temps.make();
    const { log, lines } = captureLog();
    const service = new CronService({
      storePath,
      bus: { publishInbound: (msg) => published.push(msg) },
      maxCatchUp: 5,
      log,
      sessions: new SessionStore(sessionsDir),
    });
    services.push(service);
    const job = await service.add(input({ everySeconds: 3600 }));
    // A folder where the session file should be: the store cannot delete it.
    const path = join(sessionsDir, `${safeKey(CRON_SESSION_PREFIX + job.id)}.jsonl`);
    await mkdir(path);

    expect(await service.remove(job.id)).toBe(true);
    expect(await onDisk()).toEqual([]);
    const warning = lines.find((l) => l.msg === "cron job removed, but its session could not be deleted");
    expect(warning).toMatchObject({ id: job.id, session: CRON_SESSION_PREFIX + job.id });
    expect(JSON.stringify(warning?.err)).toContain(path);
  });

  it("a job gone by the end of its turn loses the session file that turn wrote (one-shot, or removed mid-turn)", async () => {
    const sessionsDir = await temps.make();
    const service = new CronService({
      storePath,
      bus: { publishInbound: (msg) => published.push(msg) },
      maxCatchUp: 5,
      log: silentLog(),
      pollIntervalMs: 2000,
      sessions: new SessionStore(sessionsDir),
    });
    services.push(service);
    await service.start();
    const fileOf = (msg: InboundMessage) => join(sessionsDir, `${safeKey(msg.sessionKey!)}.jsonl`);
    const once = await service.add(input({ at: "2025-06-02T08:01:00Z" }));
    const recurring = await service.add(input({ everySeconds: 3600 }));
    await advance(HOUR);
    const onceTurn = published.find((m) => m.metadata?.cronJobId === once.id)!;
    const recurringTurn = published.find((m) => m.metadata?.cronJobId === recurring.id)!;
    // The turns save their exchanges; the one-shot job has removed itself as it fired.
    await writeFile(fileOf(onceTurn), "{}\n");
    await writeFile(fileOf(recurringTurn), "{}\n");
    expect((await onDisk()).map((j) => j.id)).toEqual([recurring.id]);

    service.turnEnded(onceTurn);
    service.turnEnded(recurringTurn);
    await service.idle();
    expect(await readdir(sessionsDir)).toEqual([`${safeKey(recurringTurn.sessionKey!)}.jsonl`]);

    // Removed while its turn runs: remove() deletes the file, the turn writes it again, its end deletes it.
    expect(await service.remove(recurring.id)).toBe(true);
    await writeFile(fileOf(recurringTurn), "{}\n");
    service.turnEnded(recurringTurn);
    await service.idle();
    expect(await readdir(sessionsDir)).toEqual([]);
  });

  it("list() filters by chat and sorts soonest first", async () => {
    const service = makeService();
    const later = await service.add(input({ everySeconds: 7200 }));
    const sooner = await service.add(input({ everySeconds: 600 }));
    await service.add(input({ everySeconds: 60 }, { channel: "telegram", to: "9" }));
    expect((await service.list({ channel: "slack", chatId: "C1" })).map((j) => j.id)).toEqual([
      sooner.id,
      later.id,
    ]);
    expect(await service.list()).toHaveLength(3);
  });
});

describe("CronService and other processes", () => {
  it("picks up a job another process adds to the file, without a restart", async () => {
    const service = makeService();
    await service.start();
    const cli = makeService(); // never started: what `palaver cron add` does
    const job = await cli.add(input({ at: "2025-06-02T08:01:00Z" }));
    await advance(2000); // one poll
    expect(published).toEqual([]);
    await advance(MIN - 2000);
    expect(published.map((m) => m.sessionKey)).toEqual([`cron:${job.id}`]);
  });

  it("keeps jobs another process added while it fires its own (read-modify-write)", async () => {
    const service = makeService();
    await service.start();
    await service.add(input({ everySeconds: 60 }));
    const cli = makeService();
    const other = await cli.add(input({ everySeconds: 3600 }, { to: "C9" }));
    // The service fires before its poll noticed the new job; the job must survive the write.
    await advance(MIN);
    expect(published).toHaveLength(1);
    expect((await onDisk()).map((j) => j.id)).toContain(other.id);
  });

  it("runs a job marked due by `palaver cron run` (requestRun) within a poll", async () => {
    const service = makeService();
    await service.start();
    const job = await service.add(input({ cronExpr: "0 9 * * *", tz: "UTC" }));
    await makeService().requestRun(job.id);
    await advance(2000);
    expect(published).toHaveLength(1);
    expect(published[0]!.content).not.toContain("not running");
    expect((await onDisk())[0]!.state.nextRunAtMs).toBe(Date.parse("2025-06-02T09:00:00Z"));
  });

  it("writes a pid file while started, so `palaver cron` knows a gateway is running", async () => {
    const service = makeService();
    await service.start();
    expect(await readFile(CronService.pidPath(storePath), "utf8")).toBe(String(process.pid));
    // This process itself does not count as "elsewhere".
    expect(await CronService.runningElsewhere(storePath)).toBe(false);
    await service.stop();
    await expect(readFile(CronService.pidPath(storePath), "utf8")).rejects.toThrow(/ENOENT/);
  });
});

describe("CronService: the gateway and the terminal chat share the file", () => {
  it("the gateway runs every job but the terminal's; `palaver chat` runs its own chat's, late ones at its next start", async () => {
    const gateway = makeService({ runs: gatewayJobs });
    await gateway.start();
    const telegramJob = await gateway.add(
      input({ at: "2025-06-02T08:01:00Z" }, { channel: "telegram", to: "42" }),
    );
    const terminalJob = await gateway.add(
      input({ at: "2025-06-02T08:01:00Z" }, { channel: "cli", to: "direct" }),
    );
    await gateway.add(input({ at: "2025-06-02T08:01:00Z" }, { channel: "cli", to: "other-session" }));
    await advance(MIN);
    expect(published.map((m) => m.sessionKey)).toEqual([`cron:${telegramJob.id}`]);
    // Not fired by the gateway: still waiting in the file for the terminal.
    expect((await onDisk()).map((j) => j.payload.channel)).toEqual(["cli", "cli"]);

    // The terminal chat opens later: the missed reminder runs (marked late), and only its own chat's.
    await advance(10 * MIN);
    const terminalRuns: InboundMessage[] = [];
    const terminal = makeService({ runs: terminalJobs("direct"), announce: false, sink: terminalRuns });
    await terminal.start();
    await advance(0);
    expect(terminalRuns.map((m) => m.sessionKey)).toEqual([`cron:${terminalJob.id}`]);
    expect(terminalRuns[0]!.metadata?.origin).toMatchObject({ channel: "cli", chatId: "direct" });
    // It does not pass itself off as the gateway: the gateway's pid file is still the gateway's.
    expect(await readFile(CronService.pidPath(storePath), "utf8")).toBe(String(process.pid));
    await terminal.stop();
    expect(await readFile(CronService.pidPath(storePath), "utf8")).toBe(String(process.pid));
  });
});

describe("CronService catch-up at start", () => {
  it("runs missed jobs once (oldest first, at most maxCatchUp, marked late) and skips the rest", async () => {
    const first = makeService();
    await first.start();
    const a = await first.add(input({ at: "2025-06-02T09:00:00Z" }, { message: "A" }));
    const b = await first.add(input({ cronExpr: "30 11 * * *", tz: "Europe/Paris" }, { message: "B" })); // 09:30Z
    const c = await first.add(input({ everySeconds: 3 * 3600 }, { message: "C" })); // 11:00Z
    const d = await first.add(input({ at: "2025-06-02T12:00:00Z" }, { message: "D" }));
    await first.stop();

    // palaver is down until 13:00.
    vi.setSystemTime(Date.parse("2025-06-02T13:00:00Z"));
    const { log, lines } = captureLog();
    const second = makeService({ maxCatchUp: 2, log });
    await second.start();

    expect(published.map((m) => m.sessionKey)).toEqual([`cron:${a.id}`, `cron:${b.id}`]);
    expect(published[0]!.content).toMatch(
      /^\[Scheduled task "A" \(job \w+\)\]\n\(This was due at 2025-06-02 \d\d:00 \(.+\) but palaver was not running then\.\)\nA\n/,
    );
    expect(published[1]!.content).toContain(
      "(This was due at 2025-06-02 11:30 (Europe/Paris) but palaver was not running then.)",
    );

    const jobs = await onDisk();
    expect(jobs.find((j) => j.id === a.id)).toBeUndefined(); // one-shot, ran
    expect(jobs.find((j) => j.id === b.id)!.state).toMatchObject({
      lastStatus: "ok",
      nextRunAtMs: Date.parse("2025-06-03T09:30:00Z"),
    });
    expect(jobs.find((j) => j.id === c.id)!.state).toMatchObject({
      lastStatus: "skipped",
      nextRunAtMs: Date.parse("2025-06-02T16:00:00Z"),
    });
    expect(jobs.find((j) => j.id === d.id)).toMatchObject({
      enabled: false,
      state: { lastStatus: "skipped", nextRunAtMs: null },
    });
    const skipped = lines.filter((l) => String(l.msg).includes("missed while palaver was not running"));
    expect(skipped.map((l) => l.id)).toEqual([c.id, d.id]);

    // Nothing runs twice.
    await advance(HOUR);
    expect(published).toHaveLength(2);
  });

  it("with maxCatchUp 0 nothing missed runs", async () => {
    const first = makeService();
    const job = await first.add(input({ everySeconds: 600 }));
    vi.setSystemTime(START + HOUR);
    await makeService({ maxCatchUp: 0 }).start();
    expect(published).toHaveLength(0);
    expect((await onDisk())[0]!.state).toMatchObject({
      lastStatus: "skipped",
      nextRunAtMs: START + HOUR + 600_000,
    });
    expect(job.id).toBeTruthy();
  });

  it("gives a job written without a next run (by hand, by nanobot) one", async () => {
    const store = new CronStore(storePath, { log: silentLog() });
    await store.write({
      version: 1,
      extra: {},
      invalid: [],
      jobs: [
        {
          id: "hand0001",
          name: "by hand",
          enabled: true,
          schedule: { kind: "every", everyMs: 60_000 },
          payload: { kind: "agent_turn", message: "hello", deliver: true, channel: "telegram", to: "5" },
          state: { nextRunAtMs: null, lastRunAtMs: null, lastStatus: null, lastError: null },
          createdAtMs: 0,
          updatedAtMs: 0,
          deleteAfterRun: false,
        },
      ],
    });
    const service = makeService();
    await service.start();
    expect((await onDisk())[0]!.state.nextRunAtMs).toBe(START + MIN);
    await advance(MIN);
    expect(published.map((m) => m.chatId)).toEqual(["telegram:5"]);
  });
});
