/** The Slack channel keeps to the Web API connections its turns need (platformConnections), however many replies go out at once. */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createSlackChannel } from "../../../src/channels/slack/adapter.js";
import { ConfigSchema } from "../../../src/config/schema.js";
import { FakeSlack } from "../../fakes/slack-server.js";
import { FAST, slackSection } from "./helpers.js";

let slack: FakeSlack;
let workspace: string;
beforeEach(async () => {
  slack = await FakeSlack.start();
  workspace = await mkdtemp(join(tmpdir(), "palaver-slack-conn-"));
});
afterEach(async () => {
  await slack.close();
  await rm(workspace, { recursive: true, force: true });
});

describe("Slack Web API calls in flight", () => {
  it("are at most 2 × (turns + subagents) + 2: twenty replies at once go six at a time", async () => {
    const config = ConfigSchema.parse({
      agents: { defaults: { maxConcurrentTurns: 1, maxSubagents: 1 } },
      channels: { slack: slackSection(slack) },
    });
    const channel = await createSlackChannel({ config, workspace, log: pino({ level: "silent" }) }, FAST);
    const sink = { allows: () => true, publishInbound: () => undefined, refuse: () => undefined };
    await channel.start(sink, new AbortController().signal);
    try {
      slack.apiLatencyMs = 50; // long enough for calls made together to overlap at the server
      await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          channel.send({ channel: "slack", chatId: `C${100 + i}`, content: `note ${i}` }),
        ),
      );
    } finally {
      await channel.stop();
    }
    expect(slack.posted().filter((p) => p.text.startsWith("note "))).toHaveLength(20);
    expect(slack.maxApiCallsAtOnce).toBeGreaterThan(1);
    expect(slack.maxApiCallsAtOnce).toBeLessThanOrEqual(6);
  });
});
