import { describe, expect, it } from "vitest";
import { bindingFor, type AgentBinding } from "../../src/agent/agents/routing.js";
import type { InboundMessage } from "../../src/bus/types.js";

const msg = (extra: Partial<InboundMessage>): InboundMessage => ({
  channel: "slack",
  senderId: "U1",
  chatId: "C1",
  content: "hi",
  ...extra,
});

describe("bindingFor", () => {
  const bindings: AgentBinding[] = [
    { match: { channel: "slack", chatId: "C1", threadId: "1700000000.000100" }, agent: "thread" },
    { match: { channel: "telegram", chatId: "-1001", threadId: "77" }, agent: "topic" },
    { match: { channel: "slack" }, agent: "slack" },
  ];

  it("matches a thread by the message's typed threadId, on every platform", () => {
    expect(bindingFor(bindings, msg({ threadId: "1700000000.000100" }))).toBe("thread");
    expect(bindingFor(bindings, msg({ channel: "telegram", chatId: "-1001", threadId: "77" }))).toBe("topic");
  });

  it("falls through to the next binding outside the thread; nothing matches: the default agent", () => {
    expect(bindingFor(bindings, msg({ threadId: "1700000000.000200" }))).toBe("slack");
    expect(bindingFor(bindings, msg({}))).toBe("slack");
    expect(bindingFor(bindings, msg({ channel: "telegram", chatId: "-1001" }))).toBeUndefined();
  });
});
