/**
 * Which conversation and kind of work an LLM call is for, carried along the async call chain
 * (AsyncLocalStorage), so the provider's decorator (metered.ts) can record it without every caller
 * passing it down: the loop opens a scope per turn, and what the turn starts (consolidation, a
 * subagent) inherits the conversation. A named agent's work opens a scope within it
 * (withAgentScope): a delegate, a spawned agent, a conversation bound to an agent. A decorator with
 * a fixed kind overrides the scope's kind.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { SYSTEM_CHANNEL, type InboundMessage } from "../bus/types.js";
import type { UsageKind } from "./record.js";

export interface UsageScope {
  session: string;
  kind: UsageKind;
  agent?: string;
}

const storage = new AsyncLocalStorage<UsageScope>();

/** Runs `fn` with every LLM call in it (and in what it starts) counted for `scope`. */
export function withUsageScope<T>(scope: UsageScope, fn: () => Promise<T>): Promise<T> {
  return storage.run(scope, fn);
}

/**
 * Runs `fn` as the named agent's work: its calls are counted for `agent` and `kind` (absent: the
 * surrounding scope's kind, "chat" outside any), in the surrounding scope's conversation, or
 * `session` when there is none.
 */
export function withAgentScope<T>(
  scope: { agent: string; kind?: UsageKind; session: string },
  fn: () => Promise<T>,
): Promise<T> {
  const outer = storage.getStore();
  return storage.run(
    {
      session: outer?.session ?? scope.session,
      kind: scope.kind ?? outer?.kind ?? "chat",
      agent: scope.agent,
    },
    fn,
  );
}

export function currentUsageScope(): UsageScope | undefined {
  return storage.getStore();
}

/** The kind of work a message's turn is: background work says so by its sender (bus systemMessage). */
export function turnKindOf(msg: Pick<InboundMessage, "channel" | "senderId">): UsageKind {
  if (msg.channel !== SYSTEM_CHANNEL) return "chat";
  if (msg.senderId === "heartbeat" || msg.senderId === "cron" || msg.senderId === "subagent")
    return msg.senderId;
  return "chat";
}
