/**
 * Usage end to end: the fake LLM's usage fields (cached and reasoning tokens included) reach the
 * usage ledger per kind of work, the session file, `/usage`, `palaver usage --json` and /metrics,
 * summed and priced (cachedInput for the cached part).
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { systemMessage } from "../../src/bus/types.js";
import { ConfigSchema } from "../../src/config/schema.js";
import { Gateway } from "../../src/gateway.js";
import { createProvider } from "../../src/llm/openai-provider.js";
import { UsageLedger, usageLedgerPath } from "../../src/usage/ledger.js";
import { FakeOpenAI, lastUserText, type FakeUsage } from "../fakes/openai-server.js";
import { ROOT, runCli } from "../helpers/cli.js";
import { TestChannel } from "../helpers/test-channel.js";
import { waitFor } from "../helpers/wait.js";

let dir: string;
let fake: FakeOpenAI;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-usage-"));
  fake = await FakeOpenAI.start();
});
afterEach(async () => {
  await fake.close();
  await rm(dir, { recursive: true, force: true });
});

const USAGE: Record<string, FakeUsage> = {
  hello: {
    prompt_tokens: 1000,
    completion_tokens: 100,
    prompt_tokens_details: { cached_tokens: 400 },
    completion_tokens_details: { reasoning_tokens: 30 },
  },
  "water the plants": { prompt_tokens: 200, completion_tokens: 20 },
  "check HEARTBEAT.md": { prompt_tokens: 300, completion_tokens: 30 },
};

function configFor() {
  return ConfigSchema.parse({
    agents: { defaults: { workspace: join(dir, "ws"), provider: "custom", model: "fake-model" } },
    providers: { custom: { apiKey: "k", apiBase: fake.baseURL } },
    channels: { telegram: { enabled: true, allowFrom: ["42"] } },
    gateway: { heartbeat: { enabled: false }, port: 0 },
    // $2 in, $10 out, $0.50 cached in, per million tokens.
    pricing: { "fake-*": { input: 2, output: 10, cachedInput: 0.5 } },
  });
}

/** The value of one sample in Prometheus' text format. */
function sample(text: string, name: string, labels: string): number {
  const line = text.split("\n").find((l) => l.startsWith(`${name}{${labels}}`));
  if (!line) throw new Error(`no ${name}{${labels}} in\n${text}`);
  return Number(line.split(" ").at(-1));
}

describe("usage per LLM call", () => {
  it("is recorded per kind and summed right in /usage, palaver usage --json and the metrics", async () => {
    const config = configFor();
    const configPath = join(dir, "config.json");
    await writeFile(configPath, JSON.stringify({ agents: { defaults: { workspace: join(dir, "ws") } } }));
    const channel = new TestChannel("telegram");
    const gateway = new Gateway({
      loaded: { config, workspace: join(dir, "ws"), path: configPath },
      provider: createProvider(config),
      platforms: { telegram: async () => channel },
    });
    fake.setHandler((req) => {
      const text = lastUserText(req);
      const key = Object.keys(USAGE).find((k) => text.includes(k)) ?? "hello";
      return { content: `re: ${key}`, usage: USAGE[key] };
    });
    await gateway.start();
    try {
      const origin = { channel: "telegram", chatId: "chat-1" };
      channel.receive({ content: "hello" });
      await waitFor(() => channel.sent.some((m) => m.content === "re: hello"));
      gateway.bus.publishInbound(
        systemMessage({ senderId: "cron", content: "water the plants", origin, sessionKey: "cron:j1" }),
      );
      gateway.bus.publishInbound(
        systemMessage({
          senderId: "heartbeat",
          content: "check HEARTBEAT.md",
          origin,
          sessionKey: "heartbeat",
        }),
      );
      const ledger = new UsageLedger(usageLedgerPath(dir));
      await waitFor(() => ledger.read().length === 3);

      channel.receive({ content: "/usage" });
      await waitFor(() => channel.sent.some((m) => m.content.startsWith("Usage of this conversation")));
      const reply = channel.sent.find((m) => m.content.startsWith("Usage of this conversation"))!.content;
      // This conversation: the chat call only. 600 fresh × $2 + 400 cached × $0.50 + 100 out × $10.
      expect(reply).toContain("today: 1 call, 1000 tokens in (400 cached), 100 out (30 reasoning), $0.0024");
      // The owner (in allowFrom) sees the whole bot, by kind.
      expect(reply).toContain(
        "Whole bot this month: 3 calls, 1500 tokens in (400 cached), 150 out (30 reasoning), $0.0039",
      );
      expect(reply).toContain("cron: 1 call, 200 tokens in, 20 out, $0.0006");
      expect(reply).toContain("heartbeat: 1 call, 300 tokens in, 30 out, $0.0009");

      const metrics = await gateway.metrics.text();
      const tokens = "palaver_usage_tokens_total";
      expect(sample(metrics, tokens, 'model="fake-model",kind="chat",type="prompt"')).toBe(1000);
      expect(sample(metrics, tokens, 'model="fake-model",kind="chat",type="cached"')).toBe(400);
      expect(sample(metrics, tokens, 'model="fake-model",kind="chat",type="reasoning"')).toBe(30);
      expect(sample(metrics, tokens, 'model="fake-model",kind="cron",type="completion"')).toBe(20);
      expect(sample(metrics, tokens, 'model="fake-model",kind="heartbeat",type="prompt"')).toBe(300);
      const cost = "palaver_usage_cost_usd_total";
      expect(sample(metrics, cost, 'model="fake-model",kind="chat"')).toBeCloseTo(0.0024, 10);
      expect(sample(metrics, cost, 'model="fake-model",kind="cron"')).toBeCloseTo(0.0006, 10);

      // The assistant message in the session keeps its call's usage.
      const session = await readFile(join(dir, "ws", "sessions", "telegram_chat-1.jsonl"), "utf8");
      const answer = session
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { role?: string; content?: string; usage?: Record<string, unknown> })
        .find((m) => m.role === "assistant" && m.content === "re: hello");
      expect(answer?.usage).toMatchObject({
        promptTokens: 1000,
        cachedTokens: 400,
        reasoningTokens: 30,
        model: "fake-model",
      });
      expect(answer?.usage?.costUsd).toBeCloseTo(0.0024, 10);
    } finally {
      await gateway.stop(1000);
    }

    const result = await runCli(["usage", "--by", "kind", "--json"], {
      cwd: dir,
      entry: join(ROOT, "tests", "usage", "run-usage-cli.ts"),
      env: { HOME: dir, PALAVER_CONFIG: configPath, PALAVER_LOG_LEVEL: "silent" },
    });
    expect(result.code).toBe(0);
    const json = JSON.parse(result.stdout) as {
      rows: { key: string; calls: number; promptTokens: number; cachedTokens: number; costUsd: number }[];
      total: { calls: number; promptTokens: number; completionTokens: number; costUsd: number };
    };
    expect(Object.fromEntries(json.rows.map((r) => [r.key, r.promptTokens]))).toEqual({
      chat: 1000,
      cron: 200,
      heartbeat: 300,
    });
    expect(json.rows.find((r) => r.key === "chat")?.cachedTokens).toBe(400);
    expect(json.total).toMatchObject({ calls: 3, promptTokens: 1500, completionTokens: 150 });
    expect(json.total.costUsd).toBeCloseTo(0.0039, 10);
  });
});
