import { afterEach, describe, expect, it, vi } from "vitest";
import type { TurnEvent } from "../../src/bus/types.js";
import { TypingIndicator } from "../../src/channels/typing.js";
import { createGate } from "../helpers/gate.js";

function turn(kind: TurnEvent["kind"], turnId: string, extra: Partial<TurnEvent> = {}): TurnEvent {
  return { kind, turnId, channel: "test", chatId: "c1", ...extra };
}

describe("TypingIndicator (shared)", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  function setup(intervalMs = 4000, maxMs = 60_000) {
    const signals: string[] = [];
    const stops: string[] = [];
    const typing = new TypingIndicator<string>({
      signal: async (target) => void signals.push(target),
      stop: async (target) => void stops.push(target),
      intervalMs,
      maxMs,
    });
    return { typing, signals, stops };
  }

  it("types from turnStart until the turnEnd of the same turn, refreshing meanwhile", async () => {
    vi.useFakeTimers();
    const { typing, signals, stops } = setup();
    typing.onTurn(turn("turnStart", "t1"), "c1", () => "chat-1");
    expect(signals).toEqual(["chat-1"]);
    await vi.advanceTimersByTimeAsync(8000);
    expect(signals).toEqual(["chat-1", "chat-1", "chat-1"]);
    typing.onTurn(turn("turnEnd", "t1", { outcome: "done" }), "c1", () => "unused");
    await vi.waitFor(() => expect(stops).toEqual(["chat-1"]));
    await vi.advanceTimersByTimeAsync(20_000);
    expect(signals).toHaveLength(3);
    expect(typing.isActive("c1")).toBe(false);
  });

  it("keeps typing while another turn in the conversation still runs", async () => {
    const { typing } = setup();
    typing.start("c1", "user-turn", "chat-1");
    typing.start("c1", "reminder-turn", "chat-1");
    await typing.end("reminder-turn");
    expect(typing.isActive("c1")).toBe(true);
    await typing.end("user-turn");
    expect(typing.isActive("c1")).toBe(false);
  });

  it("an unknown turn's end (a reply that belongs to no turn here) ends nothing", async () => {
    const { typing } = setup();
    typing.start("c1", "t1", "chat-1");
    await typing.end("someone-else");
    expect(typing.isActive("c1")).toBe(true);
    typing.stopAll();
  });

  it("ignores background turns (cron, heartbeat): nobody is waiting", () => {
    const { typing, signals } = setup();
    typing.onTurn(turn("turnStart", "bg", { background: true }), "c1", () => "chat-1");
    expect(signals).toEqual([]);
    expect(typing.isActive("c1")).toBe(false);
  });

  it("stops after maxMs when the turnEnd never comes", async () => {
    vi.useFakeTimers();
    const { typing, stops } = setup(1000, 5000);
    typing.start("c1", "t1", "chat-1");
    await vi.advanceTimersByTimeAsync(5001);
    expect(typing.isActive("c1")).toBe(false);
    expect(stops).toEqual(["chat-1"]);
  });

  it("never has two signals out at once, and settle waits for the one out", async () => {
    const gate = createGate();
    let calls = 0;
    const typing = new TypingIndicator<string>({
      signal: async () => {
        calls++;
        await gate.opened;
      },
      intervalMs: 1000,
      maxMs: 60_000,
    });
    typing.start("c1", "t1", "chat-1");
    typing.renew("c1");
    typing.renew("c1");
    expect(calls).toBe(1);
    let settled = false;
    const settling = typing.settle("c1").then(() => (settled = true));
    await Promise.resolve();
    expect(settled).toBe(false);
    gate.open();
    await settling;
    typing.stopAll();
  });

  it("a renew (a message went out) restarts the interval: still one call per interval", async () => {
    vi.useFakeTimers();
    const { typing, signals } = setup(4000);
    typing.start("c1", "t1", "chat-1");
    await vi.advanceTimersByTimeAsync(3000);
    typing.renew("c1");
    expect(signals).toHaveLength(2);
    // Without the restart the repeat would fire at 4 s, one second after the renew.
    await vi.advanceTimersByTimeAsync(3999);
    expect(signals).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(signals).toHaveLength(3);
    typing.stopAll();
  });

  it("signals once when intervalMs is 0 (a reaction) and renew does nothing", async () => {
    vi.useFakeTimers();
    const { typing, signals, stops } = setup(0);
    typing.start("msg-1", "t1", "reaction-target");
    typing.renew("msg-1");
    await vi.advanceTimersByTimeAsync(30_000);
    expect(signals).toEqual(["reaction-target"]);
    await typing.end("t1");
    expect(stops).toEqual(["reaction-target"]);
  });

  it("logs a failing signal and goes on", async () => {
    vi.useFakeTimers();
    let calls = 0;
    const typing = new TypingIndicator<string>({
      signal: async () => {
        calls++;
        throw new Error("429");
      },
      intervalMs: 1000,
      maxMs: 60_000,
    });
    typing.start("c1", "t1", "chat-1");
    await vi.advanceTimersByTimeAsync(2000);
    expect(calls).toBe(3);
    typing.stopAll();
  });
});
