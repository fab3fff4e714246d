/**
 * End to end: a job fires on the harness's bus, the agent (fake LLM) runs the
 * turn in the job's session, and the reply goes out to the chat (and thread)
 * the job was created from.
 */
import { existsSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import type { OutboundMessage } from "../../src/bus/types.js";
import { CronService } from "../../src/cron/service.js";
import { safeKey } from "../../src/sessions/store.js";
import { startHarness, type Harness } from "../helpers/agent-harness.js";
import { TempDirs } from "./helpers.js";

const temps = new TempDirs();
let harness: Harness | undefined;
let service: CronService | undefined;

afterEach(async () => {
  await service?.stop();
  await harness?.cleanup();
  await temps.cleanup();
  service = harness = undefined;
});

/** The first final reply to `channel` on the harness's bus. */
function firstFinal(h: Harness, channel: string): Promise<OutboundMessage> {
  return new Promise<OutboundMessage>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("no reply delivered within 10 s")), 10_000);
    h.bus.onOutbound((msg) => {
      if (msg.channel === channel && (msg.kind ?? "final") === "final") {
        clearTimeout(timer);
        resolve(msg);
      }
    });
  });
}

describe("cron end to end", () => {
  it("a firing job becomes an agent turn whose reply is delivered to the job's chat and thread", async () => {
    harness = await startHarness();
    harness.fake!.enqueue({ content: "Reminder: drink some water!" });
    service = new CronService({
      storePath: join(await temps.make(), "cron", "jobs.json"),
      bus: harness.bus,
      maxCatchUp: 5,
      log: pino({ level: "silent" }),
    });
    await service.start();

    const delivered = firstFinal(harness, "slack");
    const job = await service.add({
      message: "remind me to drink water",
      schedule: { kind: "at", atMs: Date.now() + 150 },
      channel: "slack",
      to: "C1",
      threadId: "171.5",
      metadata: { channelType: "channel" },
    });

    const reply = await delivered;
    expect(reply).toMatchObject({
      channel: "slack",
      chatId: "C1",
      content: "Reminder: drink some water!",
      threadId: "171.5",
      metadata: { channelType: "channel" },
    });
    const prompt = JSON.stringify(harness.fake!.requests[0]!.body.messages.at(-1));
    expect(prompt).toContain(`[Scheduled task \\"remind me to drink water\\" (job ${job.id})]`);
    // The turn ran in the job's own session, and the one-shot job is gone.
    await harness.loop.idle();
    expect(existsSync(join(harness.workspace, "sessions", `${safeKey(`cron:${job.id}`)}.jsonl`))).toBe(true);
    expect(await service.list()).toEqual([]);
  });

  it("a job an older version saved with its forum topic in payload.metadata still replies in that topic", async () => {
    harness = await startHarness();
    harness.fake!.enqueue({ content: "Stand-up in 5 minutes." });
    const storePath = join(await temps.make(), "cron", "jobs.json");
    const atMs = Date.now() + 150;
    const old = {
      id: "0ld70p1c",
      name: "stand-up",
      enabled: true,
      schedule: { kind: "at", atMs },
      payload: {
        kind: "agent_turn",
        message: "remind us of the stand-up",
        deliver: true,
        channel: "telegram",
        to: "-1001",
        sessionKey: "telegram:-1001:77",
        metadata: { threadId: 77, chatType: "supergroup" },
      },
      state: { nextRunAtMs: atMs, lastRunAtMs: null, lastStatus: null, lastError: null },
      createdAtMs: 0,
      updatedAtMs: 0,
      deleteAfterRun: true,
    };
    await mkdir(dirname(storePath), { recursive: true });
    await writeFile(storePath, JSON.stringify({ version: 1, jobs: [old] }));
    service = new CronService({ storePath, bus: harness.bus, maxCatchUp: 5, log: pino({ level: "silent" }) });
    const delivered = firstFinal(harness, "telegram");
    await service.start();

    expect(await delivered).toMatchObject({
      channel: "telegram",
      chatId: "-1001",
      content: "Stand-up in 5 minutes.",
      threadId: "77",
    });
  });
});
