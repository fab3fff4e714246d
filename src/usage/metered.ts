/**
 * The usage decorator: wraps a Provider so every successful call is recorded (the ledger, the
 * metrics, the budget) with its conversation and kind (scope.ts), and the response's usage carries
 * the call's cost for the session file. The provider itself knows nothing about ledgers.
 */
import type { ChatMessage, ChatRequest, ChatResponse, Provider, Usage } from "../llm/types.js";
import { costOf, type Pricing } from "./pricing.js";
import type { UsageEntry, UsageKind } from "./record.js";
import { currentUsageScope } from "./scope.js";

export interface MeterOptions {
  /** The provider's name in the ledger ("openrouter", "custom"...). */
  providerName: string;
  /** Read per call, so a reloaded config's prices apply to the next call. */
  pricing: () => Pricing;
  /** Where each call's entry goes (the ledger, metrics, the budget). */
  record: (entry: UsageEntry) => void;
  /** This provider's calls are always this kind (subagents, consolidation), whatever the scope says. */
  kind?: UsageKind;
}

export function meterUsage(provider: Provider, opts: MeterOptions): Provider {
  return {
    get model() {
      return provider.model;
    },
    async chat(req: ChatRequest, signal?: AbortSignal): Promise<ChatResponse> {
      const response = await provider.chat(req, signal);
      const scope = currentUsageScope();
      const model = response.model ?? req.model ?? provider.model;
      const usage = response.usage ?? estimateUsage(req.messages, response);
      const tokens = {
        promptTokens: usage.promptTokens,
        completionTokens: usage.completionTokens,
        cachedTokens: usage.cachedTokens ?? 0,
      };
      const costUsd = costOf(opts.pricing(), model, tokens);
      opts.record({
        time: new Date().toISOString(),
        session: scope?.session ?? null,
        agent: scope?.agent ?? "main",
        kind: opts.kind ?? scope?.kind ?? "chat",
        model,
        provider: opts.providerName,
        ...tokens,
        reasoningTokens: usage.reasoningTokens ?? 0,
        ...(usage.estimated ? { estimated: true } : {}),
        costUsd,
      });
      return { ...response, usage: { ...usage, costUsd } };
    },
  };
}

/**
 * Counts for a provider that reports none (some local servers, some streams): about four
 * characters a token, marked `estimated` wherever it is shown.
 */
function estimateUsage(messages: readonly ChatMessage[], response: ChatResponse): Usage {
  const chars = (value: unknown): number =>
    typeof value === "string" ? value.length : value ? JSON.stringify(value).length : 0;
  const prompt = messages.reduce((sum, m) => sum + chars(m.content) + chars(m.tool_calls), 0);
  const completion =
    chars(response.content) +
    chars(response.reasoning) +
    response.toolCalls.reduce((s, c) => s + c.rawArguments.length + c.name.length, 0);
  return {
    promptTokens: Math.ceil(prompt / 4),
    completionTokens: Math.ceil(completion / 4),
    estimated: true,
  };
}
