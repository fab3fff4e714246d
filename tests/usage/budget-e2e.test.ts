/**
 * Budgets end to end, through the gateway with the fake LLM: the owners are warned once, at 100 %
 * cron jobs and the heartbeat pause (and /status says so) while conversations go on; with hardStop
 * a person gets a plain "budget spent" reply and the LLM gets no request; a reload raising the
 * budget resumes at once.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigSchema } from "../../src/config/schema.js";
import { Gateway } from "../../src/gateway.js";
import { createProvider } from "../../src/llm/openai-provider.js";
import { UsageLedger, usageLedgerPath } from "../../src/usage/ledger.js";
import { dayOf } from "../../src/usage/summary.js";
import { FakeOpenAI, lastUserText } from "../fakes/openai-server.js";
import { TestChannel } from "../helpers/test-channel.js";
import { waitFor } from "../helpers/wait.js";

let dir: string;
let fake: FakeOpenAI;
let gateway: Gateway | undefined;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-budget-"));
  fake = await FakeOpenAI.start();
  // Every call: 1000 prompt tokens at $1 per million, $0.001.
  fake.setHandler((req) => ({
    content: `re: ${lastUserText(req)}`,
    usage: { prompt_tokens: 1000, completion_tokens: 0 },
  }));
});
afterEach(async () => {
  await gateway?.stop(1000);
  gateway = undefined;
  await fake.close();
  await rm(dir, { recursive: true, force: true });
});

function configWith(budget: Record<string, unknown>) {
  return ConfigSchema.parse({
    agents: { defaults: { workspace: join(dir, "ws"), provider: "custom", model: "fake-model" } },
    providers: { custom: { apiKey: "k", apiBase: fake.baseURL } },
    channels: { telegram: { enabled: true, allowFrom: ["42"] } },
    // The heartbeat on, its timer far off: the tests tick it themselves.
    gateway: { heartbeat: { enabled: true, intervalSeconds: 3600 }, port: 0 },
    pricing: { "fake-*": { input: 1, output: 0 } },
    budget,
  });
}

async function startGateway(budget: Record<string, unknown>): Promise<TestChannel> {
  const config = configWith(budget);
  const configPath = join(dir, "config.json");
  await writeFile(configPath, "{}");
  const channel = new TestChannel("telegram");
  gateway = new Gateway({
    loaded: { config, workspace: join(dir, "ws"), path: configPath },
    provider: createProvider(config),
    platforms: { telegram: async () => channel },
  });
  await gateway.start();
  return channel;
}

/** Sends `text` from the owner and waits for the reply that starts with `reply`. */
async function ask(channel: TestChannel, text: string, reply: string): Promise<string> {
  channel.receive({ content: text });
  await waitFor(() => channel.sent.some((m) => m.content.startsWith(reply)), undefined, reply);
  return channel.sent.find((m) => m.content.startsWith(reply))!.content;
}

/** A ledger that already holds $1 spent today (the running total starts from it). */
function spentOneDollar(): void {
  new UsageLedger(usageLedgerPath(dir)).append({
    time: new Date().toISOString(),
    session: "telegram:chat-1",
    agent: "main",
    kind: "chat",
    model: "fake-model",
    provider: "custom",
    promptTokens: 1_000_000,
    completionTokens: 0,
    cachedTokens: 0,
    reasoningTokens: 0,
    costUsd: 1,
  });
}

function nextMonthStart(): string {
  const now = new Date();
  return dayOf(new Date(now.getFullYear(), now.getMonth() + 1, 1));
}

describe("budget", () => {
  it("warns the owner once, then pauses cron and heartbeat while conversations go on", async () => {
    const channel = await startGateway({ monthlyUsd: 0.0025, warnAt: 0.6 });
    const warnings = () => channel.sent.filter((m) => m.content.startsWith("Budget:"));
    await ask(channel, "one", "re: one");
    expect(warnings()).toHaveLength(0);
    await ask(channel, "two", "re: two"); // $0.002: 80 %, over the warning level
    await waitFor(() => warnings().length === 1, undefined, "the warning");
    expect(warnings()[0]!.content).toContain("of the monthly budget of $0.0025 is spent");
    await ask(channel, "three", "re: three"); // $0.003: over

    const job = await gateway!.agent.cron.add({
      message: "water the plants",
      schedule: { kind: "every", everyMs: 3_600_000 },
      channel: "telegram",
      to: "chat-1",
    });
    await gateway!.agent.cron.run(job.id);
    const ran = await gateway!.agent.cron.get(job.id);
    expect(ran?.state.lastStatus).toBe("skipped");
    expect(ran?.state.lastError).toContain(`budget of $0.0025 is spent until ${nextMonthStart()}`);

    await mkdir(join(dir, "ws"), { recursive: true });
    await writeFile(join(dir, "ws", "HEARTBEAT.md"), "- [ ] water the plants every hour\n");
    expect(await gateway!.heartbeat.tick()).toBe("paused");
    // A new background task is refused (the spawn tool reports the reason to the model).
    expect(() =>
      gateway!.agent.subagents.spawn({
        task: "summarise the news",
        origin: { channel: "telegram", chatId: "chat-1" },
      }),
    ).toThrow("background tasks are paused: the monthly budget");

    const status = await ask(channel, "/status", "Model:");
    expect(status).toContain("Budget: $0.0030 of $0.0025 this month");
    expect(status).toContain("heartbeat, cron jobs and background tasks are paused");

    // Conversations still answer (hardStop is off), and the warning was not repeated.
    await ask(channel, "four", "re: four");
    expect(warnings()).toHaveLength(1);
    expect(fake.requests.map((r) => lastUserText(r))).toEqual(["one", "two", "three", "four"]);
  });

  it("with hardStop a person gets the budget message and the LLM no request", async () => {
    spentOneDollar();
    const channel = await startGateway({ monthlyUsd: 0.5, hardStop: true });
    const reply = await ask(channel, "hello", "Sorry,");
    expect(reply).toBe(
      `Sorry, the monthly budget of $0.5000 is spent until ${nextMonthStart()}, so I cannot answer until then.`,
    );
    expect(fake.requests).toHaveLength(0);
  });

  it("a reload that raises the budget resumes conversations and background work", async () => {
    spentOneDollar();
    const channel = await startGateway({ monthlyUsd: 0.5, hardStop: true });
    await ask(channel, "hello", "Sorry,");
    await gateway!.reload({ config: configWith({ monthlyUsd: 10, hardStop: true }) });
    await ask(channel, "hello again", "re: hello again");
    const status = await ask(channel, "/status", "Model:");
    expect(status).toContain("Budget: $1.00 of $10.00 this month");
    expect(status).not.toContain("paused");
    // Not paused: it goes on to read HEARTBEAT.md (the workspace's template lists no tasks).
    expect(await gateway!.heartbeat.tick()).toBe("no-tasks");
  });
});
