import { afterEach, describe, expect, it } from "vitest";
import { MessageBus } from "../../src/bus/bus.js";
import type { InboundMessage } from "../../src/bus/types.js";
import { isAllowed, NoticeLimiter, refusalNotice } from "../../src/channels/access.js";
import { ChannelManager } from "../../src/channels/manager.js";
import { TestChannel } from "../helpers/test-channel.js";
import { waitFor } from "../helpers/wait.js";

let manager: ChannelManager | undefined;
afterEach(async () => {
  await manager?.stop();
  manager = undefined;
});

function setup(opts: { sendProgress?: boolean; sendToolHints?: boolean; now?: () => number } = {}) {
  const bus = new MessageBus();
  const inbound: InboundMessage[] = [];
  bus.onInbound((m) => inbound.push(m));
  manager = new ChannelManager({
    bus,
    sendProgress: opts.sendProgress ?? true,
    sendToolHints: opts.sendToolHints ?? false,
    retryBaseMs: 20,
    retryMaxMs: 40,
    notices: new NoticeLimiter(60 * 60 * 1000, opts.now),
  });
  return { bus, inbound, manager };
}

describe("access rules", () => {
  const msg = (senderId: string, aliases?: string[]): InboundMessage => ({
    channel: "telegram",
    senderId,
    chatId: "1",
    content: "hi",
    metadata: aliases ? { senderAliases: aliases } : {},
  });
  it("allows listed ids and aliases, everybody with *, nobody with an empty list", () => {
    expect(isAllowed(msg("42"), ["42"])).toBe(true);
    expect(isAllowed(msg("43"), ["42"])).toBe(false);
    expect(isAllowed(msg("43", ["@alice"]), ["alice"])).toBe(true);
    expect(isAllowed(msg("43", ["alice"]), ["@alice"])).toBe(false);
    expect(isAllowed(msg("43"), ["*"])).toBe(true);
    expect(isAllowed(msg("43"), [])).toBe(false);
  });
  it("tells the sender its id and the config key", () => {
    expect(refusalNotice("telegram", "99")).toMatch(/id is 99.*"99".*channels\.telegram\.allowFrom/);
  });
});

describe("ChannelManager", () => {
  it("admits allowed senders to the bus and routes replies back by channel name", async () => {
    const { bus, inbound, manager } = setup();
    const alpha = new TestChannel("alpha");
    const beta = new TestChannel("beta");
    manager.add(alpha, { allowFrom: ["42"] });
    manager.add(beta, { allowFrom: ["*"] });
    await manager.start();

    alpha.receive({ content: "hello" });
    beta.receive({ content: "hey", senderId: "7" });
    expect(inbound.map((m) => [m.channel, m.content])).toEqual([
      ["alpha", "hello"],
      ["beta", "hey"],
    ]);

    bus.publishOutbound({ channel: "beta", chatId: "chat-1", content: "reply to beta" });
    await manager.flush(1000);
    expect(beta.sent.map((m) => m.content)).toEqual(["reply to beta"]);
    expect(alpha.sent).toEqual([]);
  });

  it("refuses unknown senders, tells them their id at most once an hour, and logs them", async () => {
    let now = 1_000_000;
    const { inbound, manager } = setup({ now: () => now });
    const alpha = new TestChannel("alpha");
    manager.add(alpha, { allowFrom: ["42"] });
    await manager.start();

    alpha.receive({ content: "let me in", senderId: "666" });
    alpha.receive({ content: "please", senderId: "666" });
    await manager.flush(1000);
    expect(inbound).toEqual([]);
    expect(alpha.sent).toHaveLength(1);
    expect(alpha.sent[0]!.content).toMatch(/666.*channels\.alpha\.allowFrom/);

    now += 61 * 60 * 1000;
    alpha.receive({ content: "again", senderId: "666" });
    await manager.flush(1000);
    expect(alpha.sent).toHaveLength(2);
  });

  it("nobody gets in when allowFrom is empty", async () => {
    const { inbound, manager } = setup();
    const alpha = new TestChannel("alpha");
    manager.add(alpha, { allowFrom: [] });
    await manager.start();
    alpha.receive({ content: "hi" });
    expect(inbound).toEqual([]);
  });

  it("keeps the other channels running while a failing one is retried with backoff", async () => {
    const { inbound, manager } = setup();
    const good = new TestChannel("good");
    const flaky = new TestChannel("flaky", { failStarts: 2 });
    manager.add(flaky, { allowFrom: ["*"] });
    manager.add(good, { allowFrom: ["*"] });
    await manager.start();

    good.receive({ content: "still works" });
    expect(inbound.map((m) => m.content)).toEqual(["still works"]);
    const flakyStatus = manager.status().find((s) => s.name === "flaky");
    expect(flakyStatus?.state).toBe("retrying");
    expect(flakyStatus?.lastError).toMatch(/bad token/);

    await waitFor(() => manager.status().find((s) => s.name === "flaky")!.state === "running");
    expect(flaky.startAttempts).toBe(3);
    flaky.receive({ content: "back" });
    expect(inbound.map((m) => m.content)).toEqual(["still works", "back"]);
  });

  it("delivers progress and tool hints only as configured, per channel overrides first", async () => {
    const { bus, manager } = setup({ sendProgress: false, sendToolHints: false });
    const quiet = new TestChannel("quiet");
    const chatty = new TestChannel("chatty");
    manager.add(quiet, { allowFrom: ["*"] });
    manager.add(chatty, { allowFrom: ["*"], sendProgress: true, sendToolHints: true });
    await manager.start();
    for (const channel of ["quiet", "chatty"]) {
      bus.publishOutbound({ channel, chatId: "c", content: "thinking", kind: "progress" });
      bus.publishOutbound({ channel, chatId: "c", content: 'read_file("a")', kind: "toolHint" });
      bus.publishOutbound({ channel, chatId: "c", content: "answer", kind: "final" });
    }
    await manager.flush(1000);
    expect(quiet.sent.map((m) => m.content)).toEqual(["answer"]);
    expect(chatty.sent.map((m) => m.content)).toEqual(["thinking", 'read_file("a")', "answer"]);
  });

  it("keeps one chat's messages in order even when sends are slow", async () => {
    const { bus, manager } = setup();
    const slow = new TestChannel("slow", { sendDelayMs: 20 });
    manager.add(slow, { allowFrom: ["*"] });
    await manager.start();
    for (let i = 0; i < 5; i++) bus.publishOutbound({ channel: "slow", chatId: "c", content: `m${i}` });
    await manager.flush(2000);
    expect(slow.sent.map((m) => m.content)).toEqual(["m0", "m1", "m2", "m3", "m4"]);
  });

  it("stops channels in reverse order and takes no messages after closing intake", async () => {
    const { inbound, manager } = setup();
    const order: string[] = [];
    const first = new TestChannel("first", { onStop: () => order.push("first") });
    const second = new TestChannel("second", { onStop: () => order.push("second") });
    manager.add(first, { allowFrom: ["*"] });
    manager.add(second, { allowFrom: ["*"] });
    await manager.start();
    manager.closeIntake();
    first.receive({ content: "too late" });
    expect(inbound).toEqual([]);
    await manager.stop();
    expect(order).toEqual(["second", "first"]);
  });
});
