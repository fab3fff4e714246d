/**
 * End to end: a job fires on the harness's bus, the agent (fake LLM) runs the
 * turn in the job's session, and the reply goes out to the chat (and thread)
 * the job was created from.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
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

    const delivered = new Promise<OutboundMessage>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no reply delivered within 10 s")), 10_000);
      harness!.bus.onOutbound((msg) => {
        if (msg.channel === "slack" && (msg.kind ?? "final") === "final") {
          clearTimeout(timer);
          resolve(msg);
        }
      });
    });
    const job = await service.add({
      message: "remind me to drink water",
      schedule: { kind: "at", atMs: Date.now() + 150 },
      channel: "slack",
      to: "C1",
      metadata: { thread_ts: "171.5" },
    });

    const reply = await delivered;
    expect(reply).toMatchObject({
      channel: "slack",
      chatId: "C1",
      content: "Reminder: drink some water!",
      metadata: { thread_ts: "171.5" },
    });
    const prompt = JSON.stringify(harness.fake!.requests[0]!.body.messages.at(-1));
    expect(prompt).toContain(`[Scheduled task \\"remind me to drink water\\" (job ${job.id})]`);
    // The turn ran in the job's own session, and the one-shot job is gone.
    await harness.loop.idle();
    expect(existsSync(join(harness.workspace, "sessions", `${safeKey(`cron:${job.id}`)}.jsonl`))).toBe(true);
    expect(await service.list()).toEqual([]);
  });
});
