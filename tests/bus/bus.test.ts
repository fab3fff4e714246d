import { describe, expect, it } from "vitest";
import { MessageBus } from "../../src/bus/bus.js";
import type { InboundMessage } from "../../src/bus/types.js";

const msg = (content: string): InboundMessage => ({ channel: "t", senderId: "u", chatId: "c", content });

describe("MessageBus", () => {
  it("hands every message to every subscriber, in order, and stops after unsubscribe", () => {
    const bus = new MessageBus();
    const a: string[] = [];
    const b: string[] = [];
    const stopA = bus.onInbound((m) => a.push(m.content));
    bus.onInbound((m) => b.push(m.content));
    bus.publishInbound(msg("one"));
    stopA();
    bus.publishInbound(msg("two"));
    expect(a).toEqual(["one"]);
    expect(b).toEqual(["one", "two"]);
  });

  it("keeps the two directions apart", () => {
    const bus = new MessageBus();
    const outbound: string[] = [];
    bus.onOutbound((m) => outbound.push(m.content));
    bus.publishInbound(msg("in"));
    bus.publishOutbound({ channel: "t", chatId: "c", content: "out" });
    expect(outbound).toEqual(["out"]);
  });
});
