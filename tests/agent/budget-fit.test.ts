import { describe, expect, it } from "vitest";
import { ContextBudget } from "../../src/agent/budget/budget.js";
import { fitMessages, KEEP_TOOL_RESULTS } from "../../src/agent/budget/fit.js";
import { estimateTokens, TokenCounter } from "../../src/agent/budget/tokens.js";
import type { ChatMessage } from "../../src/llm/types.js";
import { commonPrefix, pairingProblems, text, toolTurn } from "./budget-helpers.js";

const SYSTEM: ChatMessage = { role: "system", content: "You are palaver." };
const counter = new TokenCounter("unknown-model"); // chars/4: predictable in these tests
const count = (m: ChatMessage) => counter.message(m);

function chat(turns: number, resultChars = 4000): ChatMessage[] {
  const messages: ChatMessage[] = [SYSTEM];
  for (let i = 0; i < turns; i++) messages.push(...toolTurn(i, resultChars));
  messages.push({ role: "user", content: "and now?" });
  return messages;
}

const fit = (messages: ChatMessage[], budget: number) =>
  fitMessages({ messages, budget, count, keepFrom: messages.length - 1 });

describe("fitMessages", () => {
  it("leaves a prompt that fits as it is", () => {
    const messages = chat(3);
    const result = fit(messages, 1_000_000);
    expect(result.messages).toEqual(messages);
    expect(result.messages.every((m, i) => m === messages[i])).toBe(true);
    expect(result).toMatchObject({ stubbed: 0, dropped: 0, cut: false, fits: true });
  });

  it("stubs old tool results first, keeps the newest whole and every call with its result", () => {
    const messages = chat(20);
    const result = fit(messages, 12_000);
    expect(result.fits).toBe(true);
    expect(result.dropped).toBe(0);
    expect(result.stubbed).toBeGreaterThan(0);
    expect(result.messages).toHaveLength(messages.length);
    expect(pairingProblems(result.messages)).toEqual([]);
    const results = result.messages.filter((m) => m.role === "tool");
    const whole = results.slice(-KEEP_TOOL_RESULTS);
    expect(whole.every((m) => (m.content as string).length === 4000)).toBe(true);
    expect(results[0]!.content).toBe(
      '[content cleared to save context: read_file("f0.txt") returned 4000 characters; call it again if you need it]',
    );
    // The input is a copy: nothing the caller holds changed.
    expect((messages[3]!.content as string).length).toBe(4000);
  });

  it("decides the same way each call: equal input, byte-identical output", () => {
    const a = fit(chat(30), 15_000);
    const b = fit(structuredClone(chat(30)), 15_000);
    expect(JSON.stringify(b.messages)).toBe(JSON.stringify(a.messages));
  });

  it("keeps the prompt's prefix stable as the chat grows", () => {
    let previous: ChatMessage[] = [];
    let stable = 0;
    let total = 0;
    // A budget about 30 results big, as 10 KB results are in a 128k window.
    for (let turns = 1; turns < 150; turns++) {
      const result = fit(chat(turns), 30_000);
      expect(result.fits).toBe(true);
      const shared = commonPrefix(previous, result.messages);
      stable += result.messages.slice(0, shared).reduce((n, m) => n + count(m), 0);
      total += result.tokens;
      previous = result.messages;
    }
    // One call per turn here (the bench, with two, reaches more): a guard against a regression.
    expect(stable / total).toBeGreaterThan(0.7);
  });

  it("drops the oldest whole turns when stubs are not enough; the current turn stays", () => {
    const messages = chat(200, 100);
    const result = fit(messages, 3_000);
    expect(result.fits).toBe(true);
    expect(result.dropped).toBeGreaterThan(0);
    expect(result.messages[0]).toBe(SYSTEM);
    expect(result.messages[1]!.role).toBe("user");
    expect(result.messages.at(-1)).toEqual({ role: "user", content: "and now?" });
    expect(pairingProblems(result.messages)).toEqual([]);
  });

  it("cuts one oversized message of the current turn, with a notice", () => {
    const messages: ChatMessage[] = [SYSTEM, ...toolTurn(0, 200_000)];
    const result = fitMessages({ messages, budget: 10_000, count, keepFrom: 1 });
    expect(result.fits).toBe(true);
    expect(result.cut).toBe(true);
    const cut = result.messages[3]!.content as string;
    expect(cut).toMatch(/\[… cut to fit the model's context window: \d+ of 200000 characters kept …\]$/);
    expect(pairingProblems(result.messages)).toEqual([]);
  });

  it("shrinks the large arguments of a call whose result is cleared", () => {
    const messages: ChatMessage[] = [SYSTEM];
    for (let i = 0; i < 12; i++) {
      const id = `w${i}`;
      messages.push(
        { role: "user", content: `write ${i}` },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            {
              id,
              type: "function",
              function: {
                name: "write_file",
                arguments: JSON.stringify({ path: `f${i}`, content: text(5000, i) }),
              },
            },
          ],
        },
        {
          role: "tool",
          tool_call_id: id,
          name: "write_file",
          content: `wrote 5000 characters ${text(700, i)}`,
        },
      );
    }
    const result = fit(messages, 11_000);
    const first = result.messages[2]!.tool_calls![0]!.function.arguments;
    expect(JSON.parse(first)).toEqual({
      path: "f0",
      content: "[content cleared to save context: 5000 characters]",
    });
    expect(pairingProblems(result.messages)).toEqual([]);
  });
});

describe("TokenCounter", () => {
  it("counts gpt-4o with o200k once loaded, unknown models with chars/4", async () => {
    const sample = text(4000);
    const gpt = new TokenCounter("openai/gpt-4o-mini");
    expect(gpt.text(sample)).toBe(estimateTokens(sample)); // not loaded yet: the estimate
    await gpt.load();
    const { countTokens } = await import("gpt-tokenizer/encoding/o200k_base");
    expect(gpt.text(sample)).toBe(countTokens(sample));
    const other = new TokenCounter("llama3.2");
    await other.load();
    expect(other.text(sample)).toBe(1000);
  });

  it("loads the tokenizer only for a prompt that comes near the budget", async () => {
    const settings = {
      model: "gpt-4o",
      windowTokens: 10_000,
      budgetTokens: 6_000,
      consolidationTokens: 5_000,
    };
    const budget = new ContextBudget(settings);
    const short: ChatMessage[] = [{ role: "user", content: text(400) }];
    await budget.fit(short, undefined, 0);
    expect(budget.counter.precise).toBe(false); // ~100 tokens of 6,000: the estimate will do
    const long: ChatMessage[] = [{ role: "user", content: text(14_000) }];
    const result = await budget.fit(long, undefined, 0);
    expect(budget.counter.precise).toBe(true);
    const { countTokens } = await import("gpt-tokenizer/encoding/o200k_base");
    expect(result.tokensBefore).toBeGreaterThanOrEqual(countTokens(long[0]!.content as string));
  });
});
