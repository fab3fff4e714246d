import { copyFileSync } from "node:fs";
import { appendFile, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MessageBus } from "../../src/bus/bus.js";
import type { InboundMessage } from "../../src/bus/types.js";
import { ChannelManager } from "../../src/channels/manager.js";
import { Journal, JOURNAL_ID } from "../../src/daemon/journal.js";
import { TestChannel } from "../helpers/test-channel.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-journal-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const inbound = (messageId: number, content = `m${messageId}`): InboundMessage => ({
  channel: "telegram",
  senderId: "1",
  chatId: "10",
  content,
  metadata: { messageId },
});

/** What a restart would replay, read from a copy so the live journal's file is left alone. */
function pendingAfterCrash(path: string) {
  const copy = `${path}.crash-copy`;
  copyFileSync(path, copy);
  const journal = new Journal(copy);
  const { inbound } = journal.open();
  journal.close();
  return inbound;
}

describe("Journal", () => {
  it("replays unfinished messages and unsent replies after a restart, oldest first", () => {
    const path = join(dir, "j.jsonl");
    const a = new Journal(path);
    a.open();
    const first = a.recordInbound(inbound(1))!;
    const second = a.recordInbound(inbound(2))!;
    a.recordInbound(inbound(3));
    a.markDone(second);
    const out = a.recordOutbound({ channel: "telegram", chatId: "10", content: "reply" });
    a.recordOutbound({ channel: "telegram", chatId: "10", content: "sent one" });
    a.markSent(a.recordOutbound({ channel: "telegram", chatId: "10", content: "gone" }));
    // no close(): as after a crash

    const b = new Journal(path);
    const pending = b.open();
    expect(pending.inbound.map((p) => p.msg.content)).toEqual(["m1", "m3"]);
    expect(pending.inbound[0]!.id).toBe(first);
    expect(pending.outbound.map((p) => p.msg.content)).toEqual(["reply", "sent one"]);
    expect(pending.outbound[0]!.id).toBe(out);
    b.close();
  });

  it("never admits the same platform message twice, across restarts too", () => {
    const path = join(dir, "j.jsonl");
    const a = new Journal(path);
    a.open();
    const id = a.recordInbound(inbound(7))!;
    expect(a.recordInbound(inbound(7))).toBeNull();
    a.markDone(id);
    a.close();
    const b = new Journal(path);
    b.open();
    expect(b.recordInbound(inbound(7))).toBeNull();
    expect(b.recordInbound(inbound(8))).not.toBeNull();
    // Messages without a platform id cannot be de-duplicated and are always admitted.
    const noId: InboundMessage = { channel: "cli", senderId: "u", chatId: "d", content: "x" };
    expect(b.recordInbound(noId)).not.toBeNull();
    expect(b.recordInbound(noId)).not.toBeNull();
    b.close();
  });

  it("skips a torn last line", async () => {
    const path = join(dir, "j.jsonl");
    const a = new Journal(path);
    a.open();
    a.recordInbound(inbound(1));
    a.close();
    await appendFile(path, '{"t":"in","id":"x","msg":{"chan');
    const b = new Journal(path);
    expect(b.open().inbound.map((p) => p.msg.content)).toEqual(["m1"]);
    b.close();
  });

  it("compacts so the file does not grow without bound", async () => {
    const path = join(dir, "j.jsonl");
    const j = new Journal(path, { compactEvery: 100, maxSeen: 50 });
    j.open();
    for (let i = 0; i < 1000; i++) {
      j.markDone(j.recordInbound(inbound(i))!);
      j.markSent(j.recordOutbound({ channel: "telegram", chatId: "10", content: "r" }));
    }
    j.recordInbound(inbound(5000, "still pending"));
    j.close();
    const lines = (await readFile(path, "utf8")).split("\n").filter(Boolean);
    expect(lines.length).toBeLessThan(100 + 50 + 1);
    const again = new Journal(path);
    expect(again.open().inbound.map((p) => p.msg.content)).toEqual(["still pending"]);
    again.close();
  });
});

describe("ChannelManager with the journal", () => {
  let manager: ChannelManager;
  afterEach(async () => {
    await manager.stop(100);
  });

  /** A started manager with one channel and a journal at `path`. */
  async function setup(channel: TestChannel, outboxRetryMs = 5000) {
    const path = join(dir, "j.jsonl");
    const journal = new Journal(path);
    journal.open();
    const bus = new MessageBus();
    const received: InboundMessage[] = [];
    bus.onInbound((m) => received.push(m));
    manager = new ChannelManager({
      bus,
      sendProgress: true,
      sendToolHints: true,
      journal,
      outboxRetryMs,
      outboxRetryBaseMs: 10,
    });
    manager.add(channel, { allowFrom: ["*"] });
    await manager.start();
    return { bus, received, journal, path };
  }

  it("journals admitted messages before they reach the bus and drops redeliveries", async () => {
    const channel = new TestChannel("telegram");
    const { received, journal } = await setup(channel);
    channel.receive({ content: "hi", metadata: { messageId: 1 } });
    channel.receive({ content: "hi", metadata: { messageId: 1 } });
    expect(received).toHaveLength(1);
    expect(received[0]!.metadata?.[JOURNAL_ID]).toEqual(expect.any(String));
    expect(journal.pending.inbound).toBe(1);
  });

  it("journals a reserved message before its downloads finish, then replaces it with the finished one", async () => {
    const channel = new TestChannel("telegram");
    const { received, path } = await setup(channel);

    const finish = channel.receiveLater({ content: "look", metadata: { messageId: 5 } });
    expect(received).toEqual([]);
    const crashedHere = pendingAfterCrash(path);
    expect(crashedHere.map((p) => p.msg.content)).toEqual([
      "look\n[an attachment was being downloaded when palaver restarted; ask for it again]",
    ]);

    finish({ media: ["/ws/media/photo.jpg"] });
    expect(received.map((m) => [m.content, m.media])).toEqual([["look", ["/ws/media/photo.jpg"]]]);
    const afterPublish = pendingAfterCrash(path);
    expect(afterPublish.map((p) => p.msg.media)).toEqual([["/ws/media/photo.jpg"]]);
    expect(afterPublish[0]!.id).toBe(received[0]!.metadata?.[JOURNAL_ID]);

    // The platform redelivers it: nothing is published twice.
    channel.receiveLater({ content: "look", metadata: { messageId: 5 } })();
    expect(received).toHaveLength(1);
  });

  it("forgets a reservation that is cancelled (an album nobody addressed to the bot)", async () => {
    const channel = new TestChannel("telegram");
    const { received, journal, path } = await setup(channel);
    channel.reserveOnly({ content: "holiday pics", metadata: { messageId: 9 } }).cancel();
    expect(received).toEqual([]);
    expect(journal.pending.inbound).toBe(0);
    expect(pendingAfterCrash(path)).toEqual([]);
  });

  it("retries a reply the platform fails to take, then marks it sent exactly once", async () => {
    const channel = new TestChannel("telegram", { failSends: 2 });
    const { bus, journal } = await setup(channel);
    bus.publishOutbound({ channel: "telegram", chatId: "10", content: "important" });
    expect(journal.pending.outbound).toBe(1);
    await manager.flush(3000);
    expect(channel.sendAttempts).toBe(3);
    expect(channel.sent.map((m) => m.content)).toEqual(["important"]);
    expect(journal.pending.outbound).toBe(0);
  });

  it("gives up after the retry budget and says so in the journal", async () => {
    const channel = new TestChannel("telegram", { failSends: Infinity });
    const { bus, journal, path } = await setup(channel, 100);
    bus.publishOutbound({ channel: "telegram", chatId: "10", content: "doomed" });
    await manager.flush(3000);
    expect(channel.sent).toEqual([]);
    expect(journal.pending.outbound).toBe(0);
    journal.close();
    expect(await readFile(path, "utf8")).toContain('"t":"dropped"');
  });
});
