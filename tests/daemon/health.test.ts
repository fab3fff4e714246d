import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigSchema } from "../../src/config/schema.js";
import { evaluateReadiness, type LlmHealth } from "../../src/daemon/health.js";
import { Gateway } from "../../src/gateway.js";
import { createLlm } from "../../src/llm/resilient.js";
import { FakeOpenAI, lastUserText } from "../fakes/openai-server.js";
import type { InboundSink } from "../../src/channels/types.js";
import { TestChannel } from "../helpers/test-channel.js";
import { waitFor } from "../helpers/wait.js";

let dir: string;
let fake: FakeOpenAI;
let gateway: Gateway | undefined;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-health-"));
  fake = await FakeOpenAI.start();
});
afterEach(async () => {
  await gateway?.stop(500);
  gateway = undefined;
  await fake.close();
  await rm(dir, { recursive: true, force: true });
});

async function get(path: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${gateway!.health.port}${path}`);
  return { status: res.status, body: await res.text() };
}

/** Parses Prometheus text into "name{labels}" → value. */
function parseMetrics(text: string): Map<string, number> {
  const values = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const match = /^(\S+?)\s+(\S+)$/.exec(line);
    if (match) values.set(match[1]!, Number(match[2]));
  }
  return values;
}

/** A channel whose platform refuses every start until the test brings it up (no race with a retry timer). */
class GatedChannel extends TestChannel {
  up = false;
  override async start(bus: InboundSink): Promise<void> {
    if (!this.up) throw new Error("401 Unauthorized: bad token for telegram");
    return super.start(bus);
  }
}

describe("health endpoints of the gateway", () => {
  it("serves /healthz, /readyz (503 while a channel is down, 200 after) and /metrics", async () => {
    const config = ConfigSchema.parse({
      agents: { defaults: { workspace: join(dir, "ws"), provider: "custom", model: "fake-model" } },
      providers: { custom: { apiKey: "k", apiBase: fake.baseURL } },
      channels: { telegram: { enabled: true, allowFrom: ["*"] } },
      gateway: { port: 0, heartbeat: { enabled: false } },
    });
    const channel = new GatedChannel("telegram");
    gateway = new Gateway({
      loaded: { config, workspace: join(dir, "ws"), path: join(dir, "config.json") },
      provider: createLlm(config),
      platforms: { telegram: async () => channel },
      channelRetryBaseMs: 50,
    });
    await gateway.start();

    expect((await get("/healthz")).status).toBe(200);
    const down = await get("/readyz");
    expect(down.status).toBe(503);
    expect(JSON.parse(down.body)).toMatchObject({
      ready: false,
      components: {
        "channel:telegram": { ready: false, error: expect.stringMatching(/bad token/) as unknown },
        journal: { ready: true },
      },
    });

    // Before: the channel came up on its own 100-200 ms after start, sometimes before the 503 was asked for.
    channel.up = true;
    await waitFor(async () => (await get("/readyz")).status === 200, 10_000, "/readyz 200");

    fake.setHandler((req) => ({
      content: `re: ${lastUserText(req)}`,
      usage: { prompt_tokens: 10, completion_tokens: 3 },
    }));
    channel.receive({ content: "hi", messageId: "1" });
    await waitFor(() => channel.sent.length === 1);
    await gateway.agent.loop.idle();

    const metrics = parseMetrics((await get("/metrics")).body);
    expect(metrics.get('palaver_messages_in_total{channel="telegram"}')).toBe(1);
    expect(metrics.get('palaver_messages_out_total{channel="telegram",kind="final"}')).toBe(1);
    expect(metrics.get('palaver_llm_calls_total{model="fake-model"}')).toBeGreaterThanOrEqual(1);
    expect(metrics.get('palaver_llm_tokens_total{type="prompt"}')).toBe(10);
    expect(metrics.get("palaver_llm_prompt_tokens_count")).toBe(1);
    expect(metrics.get("palaver_llm_prompt_tokens_sum")).toBe(10);
    expect(metrics.get('palaver_turn_duration_seconds_count{outcome="replied"}')).toBe(1);
    expect(metrics.get("palaver_queue_depth")).toBe(0);
    expect(metrics.has("palaver_process_resident_memory_bytes")).toBe(true);

    expect((await get("/nope")).status).toBe(404);
  });
});

describe("evaluateReadiness", () => {
  it("is not ready when the last LLM call failed or every model's circuit is open", () => {
    const running = [{ name: "telegram", state: "running" }];
    const ready = (llm: LlmHealth) => evaluateReadiness({ channels: running, llm }).ready;
    expect(ready({})).toBe(true);
    expect(ready({ lastSuccessAt: 2, lastFailureAt: 1 })).toBe(true);
    expect(ready({ lastSuccessAt: 1, lastFailureAt: 2 })).toBe(false);
    expect(ready({ circuits: { a: "open", b: "closed" } })).toBe(true);
    expect(ready({ circuits: { a: "open" } })).toBe(false);
    expect(evaluateReadiness({ channels: [{ name: "slack", state: "retrying" }], llm: {} }).ready).toBe(
      false,
    );
  });

  it("is not ready while the gateway is starting, before any channel is registered", () => {
    const starting = evaluateReadiness({ channels: [], llm: {}, starting: true });
    expect(starting.ready).toBe(false);
    expect(starting.components.gateway).toEqual({ ready: false, state: "starting" });
    expect(starting.components.llm?.ready).toBe(true);
    expect(evaluateReadiness({ channels: [], llm: {}, starting: false }).ready).toBe(true);
  });

  it("is not ready while the journal cannot write, and says why", () => {
    const running = [{ name: "telegram", state: "running" }];
    expect(evaluateReadiness({ channels: running, llm: {}, journal: { ready: true } }).ready).toBe(true);
    const full = evaluateReadiness({
      channels: running,
      llm: {},
      journal: { ready: false, error: "disk full (ENOSPC)", since: "x" },
    });
    expect(full).toMatchObject({
      ready: false,
      components: { journal: { ready: false, error: "disk full (ENOSPC)", since: "x" } },
    });
  });
});
