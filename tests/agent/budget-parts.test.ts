/** The context budget's smaller parts: windows, the overflow shapes, consolidation by tokens. */
import { describe, expect, it } from "vitest";
import { ContextBudget } from "../../src/agent/budget/budget.js";
import { budgetSettings, contextWindowOf } from "../../src/agent/budget/windows.js";
import { TokenCounter } from "../../src/agent/budget/tokens.js";
import { tokenConsolidationRange } from "../../src/agent/consolidation.js";
import { defaultConfig } from "../../src/config/schema.js";
import { isContextOverflow } from "../../src/llm/classify-error.js";
import type { ChatMessage } from "../../src/llm/types.js";
import { captureLog } from "../helpers/log.js";
import { toolTurn } from "./budget-helpers.js";

const defaults = defaultConfig().agents.defaults;

describe("context windows", () => {
  it("takes an override, a window the name states, a known family, then contextWindowTokens", () => {
    const d = { ...defaults, contextWindows: { "llama3.2": 8192, "my-model": 50_000 } };
    expect(contextWindowOf("llama3.2", d)).toBe(8192);
    expect(contextWindowOf("ollama/my-model", d)).toBe(50_000);
    expect(contextWindowOf("moonshot-v1-32k", d)).toBe(32_768);
    expect(contextWindowOf("anthropic/claude-sonnet-4", d)).toBe(200_000);
    expect(contextWindowOf("gpt-4o-mini", d)).toBe(128_000);
    expect(contextWindowOf("gpt-4.1", d)).toBe(1_047_576);
    expect(contextWindowOf("some-new-model", d)).toBe(128_000);
    expect(contextWindowOf("some-new-model", { ...d, contextWindowTokens: 64_000 })).toBe(64_000);
  });

  it("budgets the smallest window of the model and its fallbacks, leaving room for the answer", () => {
    const s = budgetSettings({ ...defaults, maxTokens: 8192 }, ["gpt-4o", "gpt-3.5-turbo"]);
    expect(s).toEqual({
      model: "gpt-4o",
      windowTokens: 16_385,
      budgetTokens: 16_385 - 8192, // less than 0.6 of the window: the answer needs its room
      consolidationTokens: 8192,
    });
    expect(budgetSettings(defaults, ["gpt-4o"]).budgetTokens).toBe(76_800);
  });
});

describe("isContextOverflow", () => {
  // The real texts (status, code, message) of the providers palaver talks to.
  it.each([
    [
      400,
      "context_length_exceeded",
      "This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens.",
    ],
    [
      400,
      "context_length_exceeded",
      "Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 300000 tokens.",
    ],
    [
      400,
      400,
      "This endpoint's maximum context length is 131072 tokens. However, you requested about 140000 tokens.",
    ],
    [
      400,
      null,
      "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion).",
    ],
    [400, null, "The prompt (total length 25938) is too long to fit into the model (context length 4096)."],
    [400, null, "prompt too long; exceeded max context length by 540451 tokens"],
    [400, null, "the request exceeds the available context size, try increasing it"],
    [400, null, "prompt is too long: 210000 tokens > 200000 maximum"],
    [
      400,
      null,
      "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length",
    ],
    [400, null, "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."],
    [500, null, "input exceeds context length"],
  ])("HTTP %s %s: %s", (status, code, message) => {
    expect(isContextOverflow(status, code, message)).toBe(true);
  });

  it("is not a rate limit, a bad key or another bad request", () => {
    expect(isContextOverflow(429, "rate_limit_exceeded", "Rate limit reached for requests")).toBe(false);
    expect(isContextOverflow(401, "invalid_api_key", "Incorrect API key provided")).toBe(false);
    expect(isContextOverflow(400, "model_not_found", "The model `gpt-9` does not exist")).toBe(false);
    expect(isContextOverflow(503, null, "maximum context length is 4096 tokens")).toBe(false);
  });
});

describe("tokenConsolidationRange", () => {
  const counter = new TokenCounter("unknown-model");
  const count = (m: ChatMessage) => counter.message(m);
  const messages = Array.from({ length: 10 }, (_, i) => toolTurn(i, 4000)).flat(); // ~1,030 tokens a turn

  it("waits until the unconsolidated history passes the threshold", () => {
    expect(tokenConsolidationRange(messages, 0, { count, threshold: 20_000 })).toBeNull();
    expect(tokenConsolidationRange(messages, 32, { count, threshold: 5000 })).toBeNull();
  });

  it("takes the oldest part, keeps about half the threshold, and leaves the rest starting at a user message", () => {
    const range = tokenConsolidationRange(messages, 0, { count, threshold: 8000 })!;
    expect(range.start).toBe(0);
    expect(messages[range.end]!.role).toBe("user");
    const kept = messages.slice(range.end).reduce((n, m) => n + count(m), 0);
    // Half the threshold, plus at most the turn that the cut moved back to its start.
    expect(kept).toBeLessThanOrEqual(4000 + 1100);
    expect(kept).toBeGreaterThan(2000);
  });

  it("takes at most the threshold at once, so the consolidation call itself fits", () => {
    const range = tokenConsolidationRange(messages, 0, { count, threshold: 2500 })!;
    const taken = messages.slice(range.start, range.end).reduce((n, m) => n + count(m), 0);
    expect(taken).toBeLessThanOrEqual(2500 + 1100);
  });
});

describe("ContextBudget", () => {
  it("logs when it left something out, and when the provider reported an overflow", async () => {
    const { log, lines } = captureLog();
    const budget = new ContextBudget(
      { model: "unknown-model", windowTokens: 20_000, budgetTokens: 9000, consolidationTokens: 10_000 },
      log,
    );
    const small = [{ role: "user" as const, content: "hi" }];
    await budget.fit(small, undefined, 0);
    expect(lines).toEqual([]);

    const messages: ChatMessage[] = [
      { role: "system", content: "sys" },
      ...Array.from({ length: 12 }, (_, i) => toolTurn(i, 4000)).flat(),
      { role: "user", content: "now" },
    ];
    const result = await budget.fit(messages, undefined, messages.length - 1);
    expect(result.fits).toBe(true);
    expect(lines.at(-1)).toMatchObject({
      msg: "context budget: left out older parts of the prompt",
      budget: 9000,
      stubbed: result.stubbed,
    });
    const half = await budget.fit(messages, undefined, messages.length - 1, 0.5);
    expect(half.tokens).toBeLessThanOrEqual(4500);

    budget.overflowed(result.tokens, "retrying once with half the budget");
    expect(lines.at(-1)).toMatchObject({
      msg: "context overflow reported by the provider; retrying once with half the budget",
      window: 20_000,
    });
  });
});
