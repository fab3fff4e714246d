import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { MessageBus } from "../../src/bus/bus.js";
import type { InboundMessage } from "../../src/bus/types.js";
import { isAllowed, NoticeLimiter, refusalNotice } from "../../src/channels/access.js";
import { ChannelManager, type ChannelManagerOptions } from "../../src/channels/manager.js";
import { Journal } from "../../src/daemon/journal.js";
import { dropFromOutbox, readOutbox } from "../../src/daemon/outbox-file.js";
import { Metrics } from "../../src/daemon/metrics.js";
import { ChannelError } from "../../src/util/errors.js";
import { captureLog } from "../helpers/log.js";
import { TestChannel } from "../helpers/test-channel.js";
import { waitFor } from "../helpers/wait.js";

let manager: ChannelManager | undefined;
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await manager?.stop(100);
  manager = undefined;
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
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
    ...(aliases ? { senderAliases: aliases } : {}),
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
  it("says a reload is enough, not a restart (issue 13)", () => {
    const notice = refusalNotice("telegram", "99");
    expect(notice).toContain("allow list");
    expect(notice).toMatch(/systemctl reload palaver.*SIGHUP/);
    expect(notice).not.toMatch(/then restart/);
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

  it("sentTo waits for one chat's queued sends, not for another chat's", async () => {
    const { bus, manager } = setup();
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    const channel = new TestChannel("tg");
    const send = channel.send.bind(channel);
    channel.send = async (msg) => {
      if (msg.chatId === "stuck") await released;
      await send(msg);
    };
    manager.add(channel, { allowFrom: ["*"] });
    await manager.start();
    bus.publishOutbound({ channel: "tg", chatId: "stuck", content: "waits" });
    bus.publishOutbound({ channel: "tg", chatId: "c", content: "one" });
    bus.publishOutbound({ channel: "tg", chatId: "c", content: "two" });
    await manager.sentTo("tg", "c", 10_000);
    expect(channel.sent.map((m) => m.content)).toEqual(["one", "two"]);
    release();
    await manager.sentTo("tg", "stuck", 10_000);
    expect(channel.sent.map((m) => m.content)).toEqual(["one", "two", "waits"]);
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

describe("ChannelManager: turn events", () => {
  it("forwards each turn event to the channel named in it, and to no other", async () => {
    const { bus, manager } = setup();
    const tg = new TestChannel("tg");
    const other = new TestChannel("other");
    manager.add(tg, { allowFrom: ["*"] });
    manager.add(other, { allowFrom: ["*"] });
    await manager.start();
    bus.publishTurn({ kind: "turnStart", turnId: "t1", channel: "tg", chatId: "c" });
    bus.publishTurn({ kind: "turnEnd", turnId: "t1", channel: "tg", chatId: "c", outcome: "done" });
    expect(tg.turns.map((e) => `${e.kind}:${e.turnId}`)).toEqual(["turnStart:t1", "turnEnd:t1"]);
    expect(other.turns).toEqual([]);
  });
});

describe("ChannelManager: delivery", () => {
  const blocked = () =>
    new ChannelError("Forbidden: bot was blocked by the user", {
      platform: "tg",
      method: "sendMessage",
      code: 403,
      permanent: true,
    });

  /** A manager with a journal, a meter and a log, plus one started channel. */
  async function deliverySetup(channel: TestChannel, opts: Partial<ChannelManagerOptions> = {}) {
    const dir = await mkdtemp(join(tmpdir(), "palaver-delivery-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const journal = new Journal(join(dir, "messages.jsonl"));
    journal.open();
    cleanups.push(async () => journal.close());
    const bus = new MessageBus();
    const { log, lines } = captureLog();
    const delivered: string[] = [];
    const failed: string[] = [];
    manager = new ChannelManager({
      bus,
      sendProgress: true,
      sendToolHints: true,
      journal,
      log,
      retryBaseMs: 20,
      retryMaxMs: 40,
      outboxRetryBaseMs: 10,
      meter: {
        delivered: (m) => delivered.push(m.content),
        failed: (m, why) => failed.push(`${m.content}:${why}`),
      },
      ...opts,
    });
    manager.add(channel, { allowFrom: ["*"] });
    await manager.start();
    return { bus, journal, lines, delivered, failed, manager };
  }

  it("drops a permanent failure at once, says why, and the chat's next reply goes out", async () => {
    const channel = new TestChannel("tg", {
      sendError: (msg) => (msg.content === "to a blocked chat" ? blocked() : undefined),
    });
    // A retry budget far beyond the test: only dropping at once lets "next" through in time.
    const { bus, journal, lines, delivered, failed } = await deliverySetup(channel, {
      outboxRetryMs: 3_600_000,
      outboxRetryBaseMs: 3_600_000,
    });
    bus.publishOutbound({ channel: "tg", chatId: "c", content: "to a blocked chat" });
    bus.publishOutbound({ channel: "tg", chatId: "c", content: "next" });
    await waitFor(() => channel.sent.length === 1);
    expect(channel.sent.map((m) => m.content)).toEqual(["next"]);
    expect(channel.sendAttempts).toBe(2);
    expect(journal.pending.outbound).toBe(0);
    expect(delivered).toEqual(["next"]);
    expect(failed).toEqual(["to a blocked chat:permanent"]);
    const warning = lines.find((l) => l.msg === "reply can never be delivered; dropped");
    expect(warning).toMatchObject({
      level: 40,
      platform: "tg",
      method: "sendMessage",
      code: 403,
      reason: "Forbidden: bot was blocked by the user",
    });
  });

  it("retries a transient failure after the platform's retry-after, not the (much longer) backoff", async () => {
    const channel = new TestChannel("tg", {
      sendError: (_msg, attempt) =>
        attempt === 1 ? new ChannelError("Too Many Requests", { code: 429, retryAfterMs: 10 }) : undefined,
    });
    const { bus, journal, delivered, failed } = await deliverySetup(channel, {
      outboxRetryMs: 3_600_000,
      outboxRetryBaseMs: 3_600_000,
    });
    bus.publishOutbound({ channel: "tg", chatId: "c", content: "later" });
    await waitFor(() => channel.sent.length === 1);
    expect(channel.sendAttempts).toBe(2);
    expect(journal.pending.outbound).toBe(0);
    expect(delivered).toEqual(["later"]);
    expect(failed).toEqual([]);
  });

  it("gives up at once when the platform's retry-after lies beyond the retry budget", async () => {
    const channel = new TestChannel("tg", {
      sendError: () => new ChannelError("Too Many Requests", { code: 429, retryAfterMs: 3_600_000 }),
    });
    const { bus, journal, failed } = await deliverySetup(channel, { outboxRetryMs: 60_000 });
    bus.publishOutbound({ channel: "tg", chatId: "c", content: "rate limited" });
    await waitFor(() => failed.length === 1);
    expect(failed).toEqual(["rate limited:gave_up"]);
    expect(channel.sendAttempts).toBe(1);
    expect(journal.pending.outbound).toBe(0);
  });

  it("one chat whose sends keep failing does not hold back another chat", async () => {
    const channel = new TestChannel("tg", {
      sendError: (msg) => (msg.chatId === "down" ? new Error("502 Bad Gateway") : undefined),
    });
    const { bus, delivered } = await deliverySetup(channel, {
      outboxRetryMs: 3_600_000,
      outboxRetryBaseMs: 3_600_000,
    });
    bus.publishOutbound({ channel: "tg", chatId: "down", content: "stuck" });
    await waitFor(() => channel.sendAttempts === 1);
    bus.publishOutbound({ channel: "tg", chatId: "up", content: "fine" });
    await waitFor(() => channel.sent.length === 1);
    expect(channel.sent.map((m) => m.content)).toEqual(["fine"]);
    expect(delivered).toEqual(["fine"]);
  });

  it("keeps replies for a channel that is not running, with a warning, and delivers them once it starts", async () => {
    const running = new TestChannel("tg");
    const { bus, journal, lines, delivered } = await deliverySetup(running);
    // A reminder for a platform that is not enabled yet (a SIGHUP enables it later).
    bus.publishOutbound({ channel: "later", chatId: "c", content: "reminder 1" });
    bus.publishOutbound({ channel: "later", chatId: "c", content: "reminder 2" });
    await manager!.flush(1000);
    expect(manager!.heldFor("later")).toBe(2);
    expect(journal.pending.outbound).toBe(2);
    expect(
      lines.filter((l) => l.level === 40 && String(l.msg).includes("which is not enabled")),
    ).toHaveLength(2);

    const later = new TestChannel("later");
    await manager!.replace(later, { allowFrom: ["*"] });
    await waitFor(() => later.sent.length === 2);
    expect(later.sent.map((m) => m.content)).toEqual(["reminder 1", "reminder 2"]);
    expect(journal.pending.outbound).toBe(0);
    expect(delivered).toEqual(["reminder 1", "reminder 2"]);
  });

  it("never sends a held reply that `palaver outbox drop` dropped while it ran, and /status stops counting it", async () => {
    // Issue 35: the CLI appends a "dropped" line to the journal the running manager owns.
    const { bus, journal } = await deliverySetup(new TestChannel("tg"));
    bus.publishOutbound({ channel: "later", chatId: "c", content: "stale reminder" });
    bus.publishOutbound({ channel: "later", chatId: "c", content: "wanted reminder" });
    await manager!.flush(1000);
    expect(manager!.heldCounts()).toEqual({ later: 2 });
    const [stale] = readOutbox(journal.path);
    expect(stale!.msg.content).toBe("stale reminder");

    expect(dropFromOutbox(journal.path, [stale!.id], "dropped with `palaver outbox drop`")).toEqual([
      stale!.id,
    ]);
    expect(manager!.heldCounts()).toEqual({ later: 1 });

    const later = new TestChannel("later");
    await manager!.replace(later, { allowFrom: ["*"] });
    // The wanted reply was queued behind the dropped one: once it is out, the dropped one had its turn.
    await waitFor(() => later.sent.length === 1);
    await manager!.flush(1000);
    expect(later.sent.map((m) => m.content)).toEqual(["wanted reminder"]);
    expect(journal.pending.outbound).toBe(0);
    expect(readOutbox(journal.path)).toEqual([]);
  });

  it("keeps replies for a channel retrying its start and for a removed one, until it runs again", async () => {
    const flaky = new TestChannel("flaky", { failStarts: 1 });
    const { bus, delivered } = await deliverySetup(flaky, { retryBaseMs: 60_000, retryMaxMs: 60_000 });
    expect(manager!.status()[0]!.state).toBe("retrying");
    bus.publishOutbound({ channel: "flaky", chatId: "c", content: "while retrying" });
    await manager!.flush(1000);
    expect(flaky.sendAttempts).toBe(0);
    expect(manager!.heldFor("flaky")).toBe(1);

    await manager!.remove("flaky");
    bus.publishOutbound({ channel: "flaky", chatId: "c", content: "while removed" });
    const again = new TestChannel("flaky");
    await manager!.replace(again, { allowFrom: ["*"] });
    await waitFor(() => again.sent.length === 2);
    expect(again.sent.map((m) => m.content)).toEqual(["while retrying", "while removed"]);
    expect(delivered).toEqual(["while retrying", "while removed"]);
  });

  it("keeps at most maxHeldPerChannel replies for a stopped channel, dropping the oldest with a warning", async () => {
    const { bus, journal, lines, failed } = await deliverySetup(new TestChannel("tg"), {
      maxHeldPerChannel: 2,
    });
    for (const n of [1, 2, 3]) bus.publishOutbound({ channel: "gone", chatId: "c", content: `r${n}` });
    await manager!.flush(1000);
    expect(manager!.heldFor("gone")).toBe(2);
    expect(failed).toEqual(["r1:overflow"]);
    expect(journal.pending.outbound).toBe(2);
    expect(lines.some((l) => l.level === 40 && String(l.msg).includes("the oldest is dropped"))).toBe(true);
  });

  it("counts in /metrics only what was delivered, and the failures by reason", async () => {
    const metrics = new Metrics({ queueDepth: () => 0, activeTurns: () => 0, activeSubagents: () => 0 });
    const channel = new TestChannel("tg", {
      sendError: (msg) => (msg.content === "blocked" ? blocked() : undefined),
    });
    const { bus } = await deliverySetup(channel, { meter: metrics });
    bus.publishOutbound({ channel: "tg", chatId: "c", content: "blocked" });
    bus.publishOutbound({ channel: "tg", chatId: "c", content: "ok" });
    bus.publishOutbound({ channel: "tg", chatId: "c", content: "thinking", kind: "progress" });
    bus.publishOutbound({ channel: "nowhere", chatId: "c", content: "held" });
    await manager!.flush(5000);
    const text = await metrics.text();
    expect(text).toContain('palaver_messages_out_total{channel="tg",kind="final"} 1');
    expect(text).toContain('palaver_messages_out_total{channel="tg",kind="progress"} 1');
    expect(text).toContain('palaver_messages_failed_total{channel="tg",kind="final",reason="permanent"} 1');
    expect(text).not.toContain('channel="nowhere"');
  });
});
