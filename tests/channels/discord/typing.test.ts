import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { TypingIndicator } from "../../../src/channels/discord/typing.js";

describe("TypingIndicator", () => {
  let sent: string[];
  let typing: TypingIndicator;
  beforeEach(() => {
    vi.useFakeTimers();
    sent = [];
    typing = new TypingIndicator({
      send: async (chatId) => {
        sent.push(chatId);
      },
      intervalMs: 8000,
      maxMs: 60_000,
      now: () => Date.now(),
    });
  });
  afterEach(() => {
    typing.stopAll();
    vi.useRealTimers();
  });

  it("signals at once and every 8 s until the final reply", () => {
    typing.begin("c1");
    expect(sent).toEqual(["c1"]);
    vi.advanceTimersByTime(16_000);
    expect(sent).toEqual(["c1", "c1", "c1"]);
    typing.end("c1");
    vi.advanceTimersByTime(30_000);
    expect(sent).toHaveLength(3);
    expect(typing.isActive("c1")).toBe(false);
  });

  it("keeps going while another message of the chat still waits for its reply", () => {
    typing.begin("c1");
    typing.begin("c1");
    typing.end("c1");
    expect(typing.isActive("c1")).toBe(true);
    vi.advanceTimersByTime(8000);
    expect(sent).toHaveLength(2);
    typing.end("c1");
    typing.end("c1"); // a reply nobody waited for (a cron message, say) changes nothing
    expect(typing.isActive("c1")).toBe(false);
  });

  it("stops by itself after maxMs when no reply ever comes", () => {
    typing.begin("c1");
    vi.advanceTimersByTime(120_000);
    expect(typing.isActive("c1")).toBe(false);
    expect(sent.length).toBeLessThanOrEqual(1 + 60_000 / 8000);
  });

  it("renews after a progress message only while waiting, and survives a failing send", async () => {
    typing.renew("c1");
    expect(sent).toEqual([]);
    const failing = new TypingIndicator({ send: () => Promise.reject(new Error("403")), intervalMs: 10 });
    failing.begin("c2");
    await vi.advanceTimersByTimeAsync(50);
    failing.stopAll();
    typing.begin("c1");
    typing.renew("c1");
    expect(sent).toEqual(["c1", "c1"]);
  });
});
