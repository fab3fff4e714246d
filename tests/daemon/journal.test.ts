import { INTERRUPTED_DOWNLOAD_NOTE } from "../../src/channels/inbound.js";
import { copyFileSync } from "node:fs";
import { appendFile, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MessageBus } from "../../src/bus/bus.js";
import { originOf, type InboundMessage } from "../../src/bus/types.js";
import { replyTarget } from "../../src/channels/telegram/mapping.js";
import { threadTsOf } from "../../src/channels/slack/mapping.js";
import { ChannelManager } from "../../src/channels/manager.js";
import { giveUpReply, Journal } from "../../src/daemon/journal.js";
import { dropFromOutbox, readOutbox } from "../../src/daemon/outbox-file.js";
import { diskThatFills } from "../helpers/full-disk.js";
import { ConfigError } from "../../src/util/errors.js";
import { captureLog } from "../helpers/log.js";
import { TestChannel } from "../helpers/test-channel.js";
import { waitFor } from "../helpers/wait.js";

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
  messageId: String(messageId),
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

describe("Journal: replies dropped from outside (palaver outbox drop)", () => {
  it("a compaction keeps them dropped instead of writing them back as pending, and keeps their age", () => {
    const path = join(dir, "j.jsonl");
    const journal = new Journal(path, { compactEvery: 1 });
    journal.open();
    const stale = journal.recordOutbound({ channel: "telegram", chatId: "10", content: "stale" });
    const kept = journal.recordOutbound({ channel: "telegram", chatId: "10", content: "kept" });
    const [, keptBefore] = readOutbox(path);
    expect(dropFromOutbox(path, [stale], "dropped by hand")).toEqual([stale]);
    // Another reply is sent: that compacts the file from memory.
    journal.markSent(journal.recordOutbound({ channel: "telegram", chatId: "10", content: "other" }));
    expect(journal.isPendingOut(stale)).toBe(false);
    expect(readOutbox(path)).toEqual([{ id: kept, msg: keptBefore!.msg, at: keptBefore!.at }]);
    journal.close();
  });
});

describe("Journal: bad lines", () => {
  it("skips a line of valid JSON but the wrong shape, keeps it in .corrupt, and keeps the rest", async () => {
    const path = join(dir, "j.jsonl");
    const good = {
      t: "in",
      id: "a",
      at: 1,
      msg: { channel: "telegram", senderId: "1", chatId: "10", content: "ok" },
    };
    const bad = [
      '{"t":"in","id":"x","at":1}',
      '{"t":"out","id":"y","at":1,"msg":{"chatId":5}}',
      '{"t":"nope"}',
      "[1]",
    ];
    await writeFile(path, [JSON.stringify(good), ...bad].join("\n") + "\n");
    const { log, lines } = captureLog();
    const journal = new Journal(path, { log });
    const pending = journal.open(); // before: TypeError in dedupeKey, on every start
    journal.close();
    expect(pending.inbound.map((p) => p.msg.content)).toEqual(["ok"]);
    expect(pending.outbound).toEqual([]);
    expect(await readFile(`${path}.corrupt`, "utf8")).toBe(`${bad.join("\n")}\n`);
    expect(lines.filter((l) => l.msg === "journal: skipping a bad line")).toHaveLength(4);
    // The journal itself was rewritten without them.
    expect(await readFile(path, "utf8")).not.toContain('"id":"x"');
  });
});

describe("Journal: poison messages", () => {
  /** One daemon run that begins a turn on every pending message and dies before finishing it. */
  function crashingRun(path: string) {
    const journal = new Journal(path);
    const pending = journal.open();
    for (const p of pending.inbound) journal.markStarted(p.id);
    return pending; // no close(): as after a crash
  }

  it("gives a message up after 3 starts without finishing: the chat is told once, it is never replayed", () => {
    const path = join(dir, "j.jsonl");
    const first = new Journal(path);
    first.open();
    const id = first.recordInbound({ ...inbound(1, "render this page"), sessionKey: "telegram:10" })!;
    const other = first.recordInbound({ ...inbound(2, "queued behind"), chatId: "11" })!;
    first.markStarted(id); // run 1: the turn begins, the process dies
    expect(crashingRun(path).inbound.map((p) => p.id)).toEqual([id, other]); // run 2
    expect(crashingRun(path).inbound.map((p) => p.id)).toEqual([id, other]); // run 3: third start

    const fourth = new Journal(path);
    const pending = fourth.open();
    expect(pending.inbound.map((p) => p.id)).toEqual([other]); // the other message is not held back
    expect(pending.outbound).toHaveLength(1);
    const notice = pending.outbound[0]!.msg;
    expect(notice).toMatchObject({ channel: "telegram", chatId: "10", replyTo: "1" });
    expect(notice.content).toMatch(
      /^I could not finish answering your message \("render this page"\) after 3 attempts/,
    );
    expect(notice.content).toMatch(/send it again.*\/new/);
    fourth.markSent(pending.outbound[0]!.id);
    fourth.close();

    const fifth = new Journal(path);
    expect(fifth.open()).toEqual({ inbound: [expect.objectContaining({ id: other })], outbound: [] });
    // Its platform id is still remembered: a redelivery is not answered either.
    expect(fifth.recordInbound(inbound(1))).toBeNull();
    fifth.close();
  });

  it("replays a message with its sender's aliases and whether it came from a group", () => {
    const path = join(dir, "j.jsonl");
    const before = new Journal(path);
    before.open();
    before.recordInbound({ ...inbound(1), senderAliases: ["@ada"], isGroup: false });
    // no close(): as after a crash
    const after = new Journal(path);
    const { msg } = after.open().inbound[0]!;
    expect(msg.senderAliases).toEqual(["@ada"]);
    expect(msg.isGroup).toBe(false); // pairing lets a stranger in by a direct message only
    after.close();
  });

  it("reads a message journaled by an older version, its platform id still in metadata", async () => {
    const path = join(dir, "j.jsonl");
    const old = {
      channel: "telegram",
      senderId: "1",
      chatId: "10",
      content: "hi",
      metadata: { messageId: 4, senderAliases: ["@ada"], isGroup: false },
    };
    await writeFile(path, `${JSON.stringify({ t: "in", id: "old-1", at: 1, msg: old })}\n`);
    const journal = new Journal(path);
    const pending = journal.open();
    expect(pending.inbound.map((p) => p.msg.messageId)).toEqual(["4"]);
    expect(pending.inbound[0]!.msg).toMatchObject({ senderAliases: ["@ada"], isGroup: false });
    // Given up, the chat is told in a reply to it.
    expect(giveUpReply(pending.inbound[0]!.msg, 3).replyTo).toBe("4");
    journal.close();
  });

  it("reads the threads and interactions an older version journaled in metadata, so replies stay there", async () => {
    const path = join(dir, "j.jsonl");
    const topic = { channel: "telegram", senderId: "1", chatId: "-1001", content: "in the topic" };
    const lines = [
      { t: "in", id: "tg", at: 1, msg: { ...topic, metadata: { threadId: 77, chatType: "supergroup" } } },
      {
        t: "in",
        id: "cron",
        at: 2,
        msg: {
          channel: "system",
          senderId: "cron",
          chatId: "slack:C1",
          content: "[cron] water the plants",
          metadata: {
            cronJobId: "j1",
            origin: { channel: "slack", chatId: "C1", metadata: { threadTs: "1700000000.000100" } },
          },
        },
      },
      {
        t: "in",
        id: "slash",
        at: 3,
        msg: {
          channel: "discord",
          senderId: "5",
          chatId: "9",
          content: "/status",
          metadata: { interactionId: "i1" },
        },
      },
      {
        t: "out",
        id: "o1",
        at: 4,
        msg: { channel: "telegram", chatId: "-1001", content: "hi", metadata: { threadId: 55 } },
      },
      {
        t: "preview",
        id: "p1",
        turnId: "t1",
        channel: "telegram",
        chatId: "-1001",
        metadata: { threadId: 3 },
        refs: ["8"],
      },
    ];
    await writeFile(path, lines.map((l) => `${JSON.stringify(l)}\n`).join(""));
    const journal = new Journal(path);
    const { inbound: replayed, outbound } = journal.open();
    const [tg, cron, slash] = replayed.map((p) => p.msg);
    expect(tg!.threadId).toBe("77");
    expect(replyTarget(giveUpReply(tg!, 3), false)).toEqual({ chatId: "-1001", threadId: 77 });
    expect(threadTsOf(originOf(cron!))).toBe("1700000000.000100");
    expect(threadTsOf(giveUpReply(cron!, 3))).toBe("1700000000.000100");
    expect(slash!.interactionId).toBe("i1");
    expect(replyTarget(outbound[0]!.msg, false)).toEqual({ chatId: "-1001", threadId: 55 });
    expect(journal.openPreviews()[0]!.threadId).toBe("3");
    journal.close();
  });

  it("keeps start counts through a compaction", () => {
    const path = join(dir, "j.jsonl");
    const a = new Journal(path, { compactEvery: 1 });
    a.open();
    const id = a.recordInbound(inbound(1))!;
    a.markStarted(id);
    a.markStarted(id);
    a.markDone(a.recordInbound(inbound(2))!); // compacts
    a.close();
    const b = new Journal(path, { maxStarts: 2 });
    expect(b.open().inbound).toEqual([]);
    b.close();
  });
});

describe("Journal: write failures", () => {
  it("never throws, says why in health, logs once per episode, and saves everything once the disk has room", async () => {
    const path = join(dir, "j.jsonl");
    const { io, full } = diskThatFills();
    const { log, lines } = captureLog();
    const journal = new Journal(path, { io, log, retryBaseMs: 5 });
    journal.open();
    const answered = journal.recordInbound(inbound(1))!;
    full.on = true;
    const during = journal.recordInbound(inbound(2))!; // before: the ENOSPC was thrown to the channel
    journal.markDone(answered);
    journal.markSent(journal.recordOutbound({ channel: "telegram", chatId: "10", content: "re: m1" }));
    for (let i = 3; i < 50; i++) journal.markDone(journal.recordInbound(inbound(i))!);
    expect(journal.health).toEqual({
      ready: false,
      error: "disk full (ENOSPC)",
      since: expect.any(String) as unknown,
    });
    expect(journal.recordInbound(inbound(2))).toBeNull(); // still de-duplicated from memory
    await waitFor(() => lines.some((l) => l.msg?.includes("retrying") && l.msg.includes("ENOSPC")));
    expect(lines.filter((l) => l.level === 50)).toHaveLength(1); // once, not per line or per retry

    full.on = false;
    await waitFor(() => journal.health.ready, 10_000, "the journal to recover");
    expect(
      lines.some((l) => l.msg === "journal: writing again; everything held in memory meanwhile is saved"),
    ).toBe(true);
    // What a restart would see now: only the message still pending, nothing to answer twice.
    const after = pendingAfterCrash(path);
    expect(after.map((p) => p.id)).toEqual([during]);
    journal.close();
    const again = new Journal(path);
    const state = again.open();
    expect(state.outbound).toEqual([]);
    expect(again.recordInbound(inbound(7))).toBeNull();
    again.close();
  });

  it("starts on a read-only state folder (the compaction at open fails) and tries again on close", () => {
    const path = join(dir, "j.jsonl");
    const { log, lines } = captureLog();
    const erofs = () => {
      throw Object.assign(new Error("EROFS: read-only file system"), { code: "EROFS" });
    };
    const journal = new Journal(path, { io: { replace: erofs, write: erofs }, log, retryBaseMs: 60_000 });
    expect(journal.open()).toEqual({ inbound: [], outbound: [] });
    expect(journal.recordInbound(inbound(1))).toEqual(expect.any(String));
    expect(journal.health.error).toBe("file system is read-only (EROFS)");
    journal.close();
    expect(lines.some((l) => String(l.msg).includes("could not be saved before exit"))).toBe(true);
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
    channel.receive({ content: "hi", messageId: "1" });
    channel.receive({ content: "hi", messageId: "1" });
    expect(received).toHaveLength(1);
    expect(received[0]!.journalId).toEqual(expect.any(String));
    expect(journal.pending.inbound).toBe(1);
  });

  it("journals a reserved message before its downloads finish, then replaces it with the finished one", async () => {
    const channel = new TestChannel("telegram");
    const { received, path } = await setup(channel);

    const finish = channel.receiveLater({ content: "look", messageId: "5" });
    expect(received).toEqual([]);
    const crashedHere = pendingAfterCrash(path);
    // Journaled as reserved: with the "was being downloaded" note in place of the files.
    expect(crashedHere.map((p) => p.msg.content)).toEqual([`look\n${INTERRUPTED_DOWNLOAD_NOTE}`]);

    finish({ media: ["/ws/media/photo.jpg"] });
    expect(received.map((m) => [m.content, m.media])).toEqual([["look", ["/ws/media/photo.jpg"]]]);
    const afterPublish = pendingAfterCrash(path);
    expect(afterPublish.map((p) => p.msg.media)).toEqual([["/ws/media/photo.jpg"]]);
    expect(afterPublish[0]!.id).toBe(received[0]!.journalId);

    // The platform redelivers it: nothing is published twice.
    channel.receiveLater({ content: "look", messageId: "5" })();
    expect(received).toHaveLength(1);
  });

  it("forgets a reservation that is cancelled (an album nobody addressed to the bot)", async () => {
    const channel = new TestChannel("telegram");
    const { received, journal, path } = await setup(channel);
    channel.reserveOnly({ content: "holiday pics", messageId: "9" }).cancel();
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

  it("keeps a reply for a channel that is not enabled pending, with a warning, instead of dropping it", async () => {
    const channel = new TestChannel("telegram");
    const { journal } = await setup(channel);
    const id = journal.recordOutbound({ channel: "slack", chatId: "C1", content: "for slack" });
    manager.resend([{ id, msg: { channel: "slack", chatId: "C1", content: "for slack" } }]);
    await manager.flush(1000);
    expect(journal.pending.outbound).toBe(1);
    journal.close();
    const again = new Journal(journal.path);
    expect(again.open().outbound.map((p) => p.msg.content)).toEqual(["for slack"]);
    again.close();
  });
});

describe("Journal: an unreadable file", () => {
  it("is a configuration problem naming the file (exit 78), not a crash loop", async () => {
    const path = join(dir, "j.jsonl");
    await mkdir(path); // reading a folder fails like a file with the wrong owner would
    const journal = new Journal(path);
    expect(() => journal.open()).toThrow(ConfigError);
    expect(() => journal.open()).toThrow(`cannot read the message journal ${path}`);
  });
});
