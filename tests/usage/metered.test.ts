import { describe, expect, it } from "vitest";
import type { ChatRequest, ChatResponse, Provider } from "../../src/llm/types.js";
import { meterUsage } from "../../src/usage/metered.js";
import type { UsageEntry } from "../../src/usage/record.js";
import { turnKindOf, withUsageScope } from "../../src/usage/scope.js";
import { formatSum, sumOf } from "../../src/usage/summary.js";

/** Our own Provider interface answered in memory (no SDK involved). */
function provider(response: Partial<ChatResponse>): Provider {
  return {
    model: "local-model",
    chat: async (_req: ChatRequest) => ({
      content: "hi there",
      toolCalls: [],
      finishReason: "stop",
      ...response,
    }),
  };
}

describe("meterUsage", () => {
  it("estimates and marks the counts when the provider reports none, and says no price", async () => {
    const entries: UsageEntry[] = [];
    const metered = meterUsage(provider({}), {
      providerName: "vllm",
      pricing: () => ({}),
      record: (e) => entries.push(e),
    });
    const response = await withUsageScope({ session: "telegram:1", kind: "cron" }, () =>
      metered.chat({ messages: [{ role: "user", content: "x".repeat(400) }] }),
    );
    expect(entries).toEqual([
      expect.objectContaining({
        session: "telegram:1",
        kind: "cron",
        model: "local-model",
        provider: "vllm",
        promptTokens: 100,
        completionTokens: 2,
        estimated: true,
        costUsd: null,
      }),
    ]);
    expect(response.usage).toMatchObject({ estimated: true, costUsd: null });
    expect(formatSum(sumOf(entries))).toBe("1 call, 100 tokens in, 2 out, 1 estimated, no price");
  });

  it("a provider kept for one kind of work (subagents) records that kind inside a chat's scope", async () => {
    const entries: UsageEntry[] = [];
    const metered = meterUsage(provider({ usage: { promptTokens: 5, completionTokens: 1 } }), {
      providerName: "custom",
      pricing: () => ({ "local-*": { input: 1, output: 1 } }),
      record: (e) => entries.push(e),
      kind: "subagent",
    });
    await withUsageScope({ session: "slack:C1", kind: "chat" }, () => metered.chat({ messages: [] }));
    expect(entries[0]).toMatchObject({ session: "slack:C1", kind: "subagent", costUsd: 6 / 1_000_000 });
    expect(entries[0]?.estimated).toBeUndefined();
  });

  it("knows background turns by their sender", () => {
    expect(turnKindOf({ channel: "system", senderId: "heartbeat" })).toBe("heartbeat");
    expect(turnKindOf({ channel: "system", senderId: "cron" })).toBe("cron");
    expect(turnKindOf({ channel: "telegram", senderId: "cron" })).toBe("chat");
  });
});
