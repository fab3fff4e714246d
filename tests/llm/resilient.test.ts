import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { OpenAIProvider } from "../../src/llm/openai-provider.js";
import { CircuitBreaker, ResilientProvider } from "../../src/llm/resilient.js";
import { LlmError } from "../../src/util/errors.js";
import { FakeOpenAI } from "../fakes/openai-server.js";
import { startHarness, type Harness } from "../helpers/agent-harness.js";

let fake: FakeOpenAI;
beforeEach(async () => {
  fake = await FakeOpenAI.start();
});
afterEach(async () => {
  await fake.close();
});

function inner(): OpenAIProvider {
  return new OpenAIProvider({
    apiKey: "k",
    baseURL: fake.baseURL,
    model: "primary",
    maxTokens: 100,
    temperature: 0,
    timeoutMs: 5000,
    maxRetries: 1,
    retryBaseMs: 1,
    retryMaxMs: 2,
  });
}
const ask = { messages: [{ role: "user" as const, content: "hi" }] };

describe("ResilientProvider", () => {
  it("an account out of credit neither trips the breaker nor tries the fallbacks", async () => {
    fake.setHandler(() => ({
      status: 429,
      errorBody: { error: { message: "quota", type: "insufficient_quota", code: "insufficient_quota" } },
    }));
    const llm = new ResilientProvider(inner(), {
      models: ["primary", "backup"],
      breaker: { threshold: 1, cooldownMs: 60_000 },
    });
    for (let i = 0; i < 3; i++) {
      await expect(llm.chat(ask)).rejects.toMatchObject({ kind: "quota" });
    }
    expect(fake.requests.map((r) => r.body.model)).toEqual(["primary", "primary", "primary"]);
    expect(llm.circuitStates()).toEqual({ primary: "closed", backup: "closed" });
  });

  it("falls back to the next model when the primary keeps failing", async () => {
    fake.setHandler((req) =>
      req.body.model === "primary" ? { status: 500 } : { content: `from ${req.body.model}` },
    );
    const llm = new ResilientProvider(inner(), {
      models: ["primary", "backup"],
      breaker: { threshold: 3, cooldownMs: 60_000 },
    });
    const response = await llm.chat(ask);
    expect(response.content).toBe("from backup");
    expect(fake.requests.map((r) => r.body.model)).toEqual(["primary", "primary", "backup"]);
  });

  it("does not fall back on a rejected key: another model would fail the same way", async () => {
    fake.setHandler(() => ({ status: 401 }));
    const llm = new ResilientProvider(inner(), {
      models: ["primary", "backup"],
      breaker: { threshold: 3, cooldownMs: 1 },
    });
    await expect(llm.chat(ask)).rejects.toMatchObject({ kind: "auth" });
    expect(fake.requests.map((r) => r.body.model)).toEqual(["primary"]);
  });

  it("opens the circuit after repeated failures, fails fast while open, and closes after a good trial", async () => {
    let now = 1_000_000;
    let healthy = false;
    fake.setHandler(() => (healthy ? { content: "back" } : { status: 503 }));
    const llm = new ResilientProvider(inner(), {
      models: ["primary"],
      breaker: { threshold: 2, cooldownMs: 60_000, now: () => now },
    });
    await expect(llm.chat(ask)).rejects.toMatchObject({ kind: "server" });
    await expect(llm.chat(ask)).rejects.toMatchObject({ kind: "server" });
    expect(llm.circuitStates()).toEqual({ primary: "open" });
    const before = fake.requests.length;

    const fast = await llm.chat(ask).catch((e: unknown) => e);
    expect(fast).toBeInstanceOf(LlmError);
    expect((fast as LlmError).kind).toBe("unavailable");
    expect(fake.requests.length).toBe(before); // not even tried: fails fast without a clock

    now += 61_000;
    healthy = true;
    expect(llm.circuitStates()).toEqual({ primary: "half-open" });
    expect((await llm.chat(ask)).content).toBe("back");
    expect(llm.circuitStates()).toEqual({ primary: "closed" });
  });
});

describe("CircuitBreaker", () => {
  it("lets one trial call through when half-open and reopens when it fails", () => {
    let now = 0;
    const breaker = new CircuitBreaker({ threshold: 1, cooldownMs: 100, now: () => now });
    breaker.failure();
    expect(breaker.allow()).toBe(false);
    now = 150;
    expect(breaker.allow()).toBe(true);
    expect(breaker.allow()).toBe(false); // one trial at a time
    breaker.failure();
    expect(breaker.state).toBe("open");
    expect(breaker.retryInMs).toBe(100);
  });
});

describe("through the agent", () => {
  let h: Harness;
  afterEach(async () => {
    await h.cleanup();
  });

  it("tells the user in plain words and keeps the session clean when the provider is down", async () => {
    h = await startHarness({
      config: { agents: { defaults: { llm: { breakerThreshold: 1, maxRetries: 0, timeout: 5 } } } },
    });
    h.fake!.setHandler(() => ({ status: 502 }));
    const first = await h.ask("chat", "hello?");
    expect(first.content).toMatch(/couldn't reach the language model/);
    const second = await h.ask("chat", "anyone?");
    expect(second.content).toMatch(/giving it a short break/);
    expect(h.fake!.requests).toHaveLength(1);
    expect((await h.sessions.get("test:chat")).messages).toEqual([]);
  });
});
