import { describe, expect, it } from "vitest";
import { costOf, priceOf } from "../../src/usage/pricing.js";

const pricing = {
  "gpt-4o*": { input: 2.5, output: 10, cachedInput: 1.25 },
  "gpt-4o-mini*": { input: 0.15, output: 0.6 },
  "claude-sonnet-4": { input: 3, output: 15 },
};

describe("pricing", () => {
  it("picks the exact name, else the most specific glob, also without a routing prefix", () => {
    expect(priceOf(pricing, "claude-sonnet-4")?.input).toBe(3);
    expect(priceOf(pricing, "gpt-4o-2024-08-06")?.input).toBe(2.5);
    expect(priceOf(pricing, "gpt-4o-mini-2024-07-18")?.input).toBe(0.15);
    expect(priceOf(pricing, "openrouter/anthropic/claude-sonnet-4")?.output).toBe(15);
    expect(priceOf(pricing, "llama3")).toBeUndefined();
  });

  it("prices cached prompt tokens at cachedInput, and at input when there is none", () => {
    const tokens = { promptTokens: 1_000_000, completionTokens: 100_000, cachedTokens: 600_000 };
    // 400k fresh × 2.5 + 600k cached × 1.25 + 100k out × 10, per million.
    expect(costOf(pricing, "gpt-4o", tokens)).toBeCloseTo(1 + 0.75 + 1, 10);
    expect(costOf(pricing, "gpt-4o-mini", tokens)).toBeCloseTo(0.15 + 0.06, 10);
  });

  it("says no price (null, not 0) for a model nobody priced", () => {
    expect(costOf(pricing, "llama3", { promptTokens: 10, completionTokens: 5, cachedTokens: 0 })).toBeNull();
  });
});
