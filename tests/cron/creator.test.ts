/**
 * Cron jobs and who made them (issue 11): a job a chat user scheduled stops
 * for good once that user is no longer in the channel's allowFrom (SIGHUP
 * reload or restart); operator jobs and jobs of unknown origin keep running.
 */
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { InboundMessage } from "../../src/bus/types.js";
import { buildSchedule } from "../../src/cron/schedule.js";
import { CronService, type AddJobInput } from "../../src/cron/service.js";
import { CronStore } from "../../src/cron/store.js";
import type { CronJob } from "../../src/cron/types.js";
import { captureLog, TempDirs } from "./helpers.js";

const temps = new TempDirs();
const START = Date.parse("2025-06-02T08:00:00Z");
const MIN = 60_000;

let storePath: string;
let published: InboundMessage[];
let allowFrom: Record<string, string[]>;
const services: CronService[] = [];

function makeService(log = captureLog().log): CronService {
  const service = new CronService({
    storePath,
    bus: { publishInbound: (msg) => published.push(msg) },
    maxCatchUp: 5,
    log,
    pollIntervalMs: 2000,
    allowFromOf: (channel) => allowFrom[channel],
  });
  services.push(service);
  return service;
}

async function advance(ms: number): Promise<void> {
  await vi.advanceTimersByTimeAsync(ms);
  for (let i = 0; i < 3; i++) {
    for (const s of services) await s.idle();
    await vi.advanceTimersByTimeAsync(0);
  }
  for (const s of services) await s.idle();
}

async function onDisk(): Promise<CronJob[]> {
  return (await new CronStore(storePath, { log: captureLog().log }).read()).jobs;
}

function everyMinute(extra: Partial<AddJobInput> = {}): AddJobInput {
  const { schedule } = buildSchedule({ everySeconds: 60 }, Date.now());
  return { message: "ping", schedule, channel: "telegram", to: "42", ...extra };
}

const ada = { kind: "sender" as const, channel: "telegram", senderId: "42", aliases: ["@ada"] };

beforeEach(async () => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
  vi.setSystemTime(START);
  storePath = join(await temps.make(), "cron", "jobs.json");
  published = [];
  allowFrom = { telegram: ["42"] };
});
afterEach(async () => {
  for (const s of services.splice(0)) await s.stop();
  vi.useRealTimers();
  await temps.cleanup();
});

describe("cron jobs and their creator", () => {
  it("stores the creator beside nanobot's payload fields", async () => {
    const service = makeService();
    const job = await service.add(everyMinute({ creator: ada }));
    expect(job.payload).toMatchObject({ channel: "telegram", to: "42", creator: ada });
    expect((await onDisk())[0]!.payload.creator).toEqual(ada);
  });

  it("disables a sender's job, with a log line, once the sender is out of allowFrom; it never fires again", async () => {
    const { log, lines } = captureLog();
    const service = makeService(log);
    await service.start();
    const job = await service.add(everyMinute({ creator: ada }));
    await advance(MIN);
    expect(published).toHaveLength(1);

    allowFrom = { telegram: ["99"] }; // what a SIGHUP reload does to the live lookup
    await advance(MIN);
    expect(published).toHaveLength(1);
    const [stored] = await onDisk();
    expect(stored).toMatchObject({ id: job.id, enabled: false });
    expect(stored!.state).toMatchObject({ nextRunAtMs: null, lastStatus: "skipped" });
    expect(stored!.state.lastError).toMatch(
      /telegram user 42\) is no longer in channels\.telegram\.allowFrom/,
    );
    const warning = lines.find((l) => String(l.msg).startsWith("cron job disabled"));
    expect(warning).toMatchObject({ id: job.id, level: 40 });

    // Letting the sender back in does not quietly revive it.
    allowFrom = { telegram: ["42"] };
    await advance(10 * MIN);
    expect(published).toHaveLength(1);
  });

  it("checks at start too: a job due while palaver was down is not caught up for a removed sender", async () => {
    await makeService().add(everyMinute({ creator: ada }));
    allowFrom = { telegram: [] };
    vi.setSystemTime(START + 5 * MIN);
    const restarted = makeService();
    await restarted.start();
    await advance(0);
    expect(published).toEqual([]);
    expect((await onDisk())[0]!.enabled).toBe(false);
  });

  it("an alias in allowFrom keeps the job; a channel without a section counts as nobody", async () => {
    const service = makeService();
    await service.start();
    await service.add(everyMinute({ creator: ada }));
    allowFrom = { telegram: ["ada"] };
    await advance(MIN);
    expect(published).toHaveLength(1);
    allowFrom = {};
    await advance(MIN);
    expect(published).toHaveLength(1);
  });

  it("operator jobs and jobs without a creator (nanobot's, older palaver's) are not checked", async () => {
    const service = makeService();
    await service.start();
    await service.add(everyMinute({ creator: { kind: "operator" } }));
    await service.add(everyMinute());
    allowFrom = { telegram: [] };
    await advance(MIN);
    expect(published).toHaveLength(2);
    expect((await onDisk()).every((j) => j.enabled)).toBe(true);
  });
});
