/** The `cron` tool through the ToolRegistry, as the model calls it (errors come back as "Error: ..."). */
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createCronTool } from "../../../src/agent/tools/cron.js";
import { ToolRegistry } from "../../../src/agent/tools/registry.js";
import type { ToolContext } from "../../../src/agent/tools/types.js";
import { ConfigSchema } from "../../../src/config/schema.js";
import { MIN_EVERY_SECONDS } from "../../../src/cron/schedule.js";
import { CronService } from "../../../src/cron/service.js";
import { checkTarget } from "../../../src/cron/targets.js";
import { makeContext, TempDirs } from "./helpers.js";

const NOW = Date.parse("2026-01-10T12:00:00Z");
const temps = new TempDirs();
let service: CronService;
let registry: ToolRegistry;

beforeEach(async () => {
  service = new CronService({
    storePath: join(await temps.make(), "cron", "jobs.json"),
    bus: { publishInbound: () => undefined },
    maxCatchUp: 5,
    log: pino({ level: "silent" }),
    now: () => NOW,
  });
  registry = new ToolRegistry();
  registry.register(createCronTool(service));
});
afterEach(() => temps.cleanup());

const slackThread = () =>
  makeContext({
    channel: "slack",
    chatId: "C1",
    sessionKey: "slack:C1:111.2",
    metadata: { thread_ts: "111.2" },
  }).ctx;

function call(args: Record<string, unknown>, ctx: ToolContext = slackThread()): Promise<string> {
  return registry.execute(
    { id: "call-1", name: "cron", arguments: args, rawArguments: JSON.stringify(args) },
    ctx,
  );
}

describe("cron tool", () => {
  it("has nanobot's name and parameters", () => {
    const [def] = registry.definitions();
    expect(def!.function.name).toBe("cron");
    const params = def!.function.parameters as { properties: Record<string, unknown>; required: string[] };
    expect(Object.keys(params.properties).sort()).toEqual(
      ["action", "at", "cron_expr", "every_seconds", "job_id", "message", "tz"].sort(),
    );
    expect(params.required).toEqual(["action"]);
  });

  it("states the real minimum interval, which add enforces (issue 13)", async () => {
    const [def] = registry.definitions();
    expect(def!.function.description).toContain(`every_seconds (repeat; at least ${MIN_EVERY_SECONDS})`);
    expect(await call({ action: "add", message: "ping", every_seconds: MIN_EVERY_SECONDS - 1 })).toMatch(
      new RegExp(`^Error: .*at least ${MIN_EVERY_SECONDS}`),
    );
  });

  it("add records who asked (channel, sender id, aliases), so the job stops when they are let out", async () => {
    const { ctx } = makeContext({
      channel: "telegram",
      chatId: "42",
      sessionKey: "telegram:42",
      sender: { id: "42", aliases: ["@ada"] },
    });
    await call({ action: "add", message: "water", every_seconds: 600 }, ctx);
    const { ctx: background } = makeContext({ channel: "telegram", chatId: "42", sessionKey: "telegram:42" });
    await call({ action: "add", message: "heartbeat's", every_seconds: 600 }, background);
    const jobs = await service.list();
    expect(jobs.find((j) => j.payload.message === "water")!.payload.creator).toEqual({
      kind: "sender",
      channel: "telegram",
      senderId: "42",
      aliases: ["@ada"],
    });
    // A turn no person asked for (heartbeat, a subagent's result) has no sender to record.
    expect(jobs.find((j) => j.payload.message === "heartbeat's")!.payload.creator).toBeUndefined();
  });

  it("add binds the job to the turn's chat and thread", async () => {
    const out = await call({
      action: "add",
      message: "Stand-up in 5 minutes",
      cron_expr: "55 8 * * 1-5",
      tz: "Europe/Paris",
    });
    expect(out).toMatch(
      /^Created job 'Stand-up in 5 minutes' \(id: [0-9a-f]{8}, cron 55 8 \* \* 1-5 \(Europe\/Paris\)\); next run 2026-01-12 08:55 \(Europe\/Paris\)$/,
    );
    const [job] = await service.list();
    expect(job).toMatchObject({
      name: "Stand-up in 5 minutes",
      schedule: { kind: "cron", expr: "55 8 * * 1-5", tz: "Europe/Paris" },
      payload: {
        kind: "agent_turn",
        message: "Stand-up in 5 minutes",
        deliver: true,
        channel: "slack",
        to: "C1",
        sessionKey: "slack:C1:111.2",
        metadata: { thread_ts: "111.2" },
      },
      state: { nextRunAtMs: Date.parse("2026-01-12T07:55:00Z") },
      deleteAfterRun: false,
    });
  });

  it("add with `at` makes a one-shot job; with every_seconds a recurring one", async () => {
    expect(await call({ action: "add", message: "tea", at: "2026-01-10T13:30:00Z" })).toContain(
      "next run 2026-01-10 13:30",
    );
    await call({ action: "add", message: "stretch", every_seconds: 1800 });
    const jobs = await service.list();
    expect(jobs.map((j) => [j.name, j.schedule.kind, j.deleteAfterRun, j.state.nextRunAtMs])).toEqual([
      ["stretch", "every", false, NOW + 1_800_000],
      ["tea", "at", true, Date.parse("2026-01-10T13:30:00Z")],
    ]);
  });

  it("tells the model what is wrong", async () => {
    const add = (extra: Record<string, unknown>) => call({ action: "add", message: "x", ...extra });
    expect(await add({})).toBe("Error: no schedule: give one of every_seconds, cron_expr or at");
    expect(await add({ every_seconds: 60, at: "2026-01-11T09:00:00Z" })).toBe(
      "Error: more than one schedule (every_seconds and at): give only one of every_seconds, cron_expr or at",
    );
    expect(await add({ cron_expr: "0 9 * *" })).toMatch(
      /^Error: invalid cron expression "0 9 \* \*": expected 5 fields/,
    );
    expect(await add({ cron_expr: "0 9 * * *", tz: "Europe/Atlantis" })).toBe(
      'Error: unknown timezone "Europe/Atlantis": use an IANA name such as "Europe/Paris"',
    );
    expect(await add({ at: "2026-01-10T11:00:00", tz: "UTC" })).toBe(
      "Error: the time 2026-01-10T11:00:00 (2026-01-10 11:00 (UTC)) is in the past; it is now 2026-01-10 12:00 (UTC)",
    );
    expect(await add({ every_seconds: 60, tz: "UTC" })).toBe(
      "Error: tz can only be used with cron_expr or at",
    );
    expect(await add({ every_seconds: 5 })).toBe(
      "Error: every_seconds must be a whole number of at least 10 (got 5)",
    );
    expect(await call({ action: "add", every_seconds: 60 })).toBe("Error: message is required for add");
    expect(await call({ action: "remove" })).toBe("Error: job_id is required for remove");
    expect(await call({ action: "pause" })).toMatch(/^Error: invalid arguments for cron: action:/);
    expect(await service.list()).toEqual([]);
  });

  it("does not let a firing job schedule more jobs", async () => {
    const { ctx } = makeContext({ channel: "slack", chatId: "C1", sessionKey: "cron:abcd1234" });
    expect(await call({ action: "add", message: "again", every_seconds: 60 }, ctx)).toBe(
      "Error: cannot schedule new jobs from within a scheduled task",
    );
  });

  it("list and remove only see this chat's jobs", async () => {
    await call({ action: "add", message: "mine", every_seconds: 3600 });
    const other = makeContext({ channel: "telegram", chatId: "42" }).ctx;
    await call({ action: "add", message: "theirs", cron_expr: "0 9 * * *", tz: "Asia/Tokyo" }, other);
    const theirs = (await service.list({ channel: "telegram", chatId: "42" }))[0]!;

    const listed = await call({ action: "list" });
    expect(listed).toMatch(
      /^Scheduled jobs:\n- mine \(id: [0-9a-f]{8}, every 1h\)\n {2}Next run: 2026-01-10 /,
    );
    expect(listed).not.toContain("theirs");
    expect(await call({ action: "list" }, other)).toContain("Next run: 2026-01-11 09:00 (Asia/Tokyo)");

    expect(await call({ action: "remove", job_id: theirs.id })).toBe(
      `Job ${theirs.id} not found in this chat`,
    );
    expect(await service.list()).toHaveLength(2);
    expect(await call({ action: "remove", job_id: theirs.id }, other)).toBe(`Removed job ${theirs.id}`);
    expect(await call({ action: "list" }, other)).toBe("No scheduled jobs in this chat.");
  });
});

describe("cron tool: where the job's replies can go", () => {
  /** A tool that checks targets against a config with telegram enabled and slack configured but off. */
  function checkedRegistry(): ToolRegistry {
    const config = ConfigSchema.parse({
      channels: { telegram: { enabled: true, token: "1:a", allowFrom: ["*"] } },
    });
    const checked = new ToolRegistry();
    checked.register(createCronTool(service, (channel, chatId) => checkTarget(config, channel, chatId)));
    return checked;
  }
  const add = (registry: ToolRegistry, channel: string, chatId: string) =>
    registry.execute(
      {
        id: "call-1",
        name: "cron",
        arguments: { action: "add", message: "stretch", every_seconds: 600 },
        rawArguments: "{}",
      },
      makeContext({ channel, chatId, sessionKey: `${channel}:${chatId}` }).ctx,
    );

  it("refuses a channel the config does not know, naming the ones that exist", async () => {
    const out = await add(checkedRegistry(), "telegarm", "42");
    expect(out).toMatch(
      /^Error: .*unknown channel "telegarm": the channels are telegram, slack, discord, web, cli/,
    );
    expect(await service.list()).toEqual([]);
  });

  it("adds for an enabled channel without a note, and warns when it is configured but not enabled", async () => {
    const registry = checkedRegistry();
    expect(await add(registry, "telegram", "42")).not.toMatch(/Tell the user/);
    expect(await add(registry, "slack", "C1")).toMatch(
      /Tell the user: warning: channels.slack is not enabled/,
    );
    expect((await service.list()).map((j) => j.payload.channel).sort()).toEqual(["slack", "telegram"]);
  });

  it("in the terminal chat, tells the user the reminder shows there while `palaver chat` is open", async () => {
    const out = await add(checkedRegistry(), "cli", "direct");
    expect(out).toMatch(/^Created job/);
    expect(out).toContain("Tell the user: it fires in this terminal chat while `palaver chat` is open");
    expect(out).toContain("the next time you open `palaver chat`");
  });
});
