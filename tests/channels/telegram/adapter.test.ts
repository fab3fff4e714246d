/** The Telegram adapter, real grammy against the loopback fake Bot API: inbound mapping, media, sending. */
import { INTERRUPTED_DOWNLOAD_NOTE } from "../../../src/channels/inbound.js";
import { readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ConfigSchema } from "../../../src/config/schema.js";
import { createTranscriber } from "../../../src/channels/transcription.js";
import { FakeTelegram } from "../../fakes/telegram-server.js";
import { rig, type Rig } from "./helpers.js";
import type { InboundMessage, TurnEvent } from "../../../src/bus/types.js";
import { ChannelError } from "../../../src/util/errors.js";
import { MessageBus } from "../../../src/bus/bus.js";
import { NoticeLimiter } from "../../../src/channels/access.js";
import { ChannelManager } from "../../../src/channels/manager.js";
import { createGate } from "../../helpers/gate.js";
import { waitFor } from "../../helpers/wait.js";

const GROUP = { id: -1001234, type: "supergroup", title: "Team" };
const FORUM = { id: -1005678, type: "supergroup", title: "Forum", is_forum: true };

let r: Rig | undefined;
afterEach(async () => {
  await r?.cleanup();
  r = undefined;
});

async function started(opts: Parameters<typeof rig>[0] = {}): Promise<Rig> {
  r = await rig(opts);
  await r.start();
  return r;
}

/** Starts the rig's channel with a sink that records reservations (as the manager's journal makes them). */
async function startReserving(describeReserve: (m: InboundMessage) => string) {
  const events: string[] = [];
  const published: InboundMessage[] = [];
  const lifetime = new AbortController();
  await r!.channel.start(
    {
      allows: () => true,
      publishInbound: (m) => published.push(m),
      refuse: () => undefined,
      reserve: (m) => {
        events.push(describeReserve(m));
        return {
          publish: (final) => (events.push("publish"), published.push(final)),
          cancel: () => events.push("cancel"),
        };
      },
    },
    lifetime.signal,
  );
  return { events, published, lifetime };
}

describe("starting", () => {
  it("registers the commands and keeps updates that arrived while it was down", async () => {
    r = await rig();
    r.fake.userMessage({ text: "sent while palaver was down" });
    await r.start();
    expect(r.channel.identity).toEqual({ id: r.fake.bot.id, username: r.fake.bot.username });
    const commands = r.fake.callsTo("setMyCommands")[0]!.params.commands as { command: string }[];
    expect(commands.map((c) => c.command)).toEqual(["new", "stop", "help", "status"]);
    expect(r.fake.callsTo("deleteWebhook")[0]!.params.drop_pending_updates).toBeFalsy();
    expect((await r.nthInbound(1)).content).toBe("sent while palaver was down");
  });

  it("drops pending updates only when dropPendingUpdates is set", async () => {
    r = await rig({ config: { dropPendingUpdates: true } });
    r.fake.userMessage({ text: "old news" });
    await r.start();
    expect(r.fake.callsTo("deleteWebhook")[0]!.params.drop_pending_updates).toBe(true);
    r.fake.userMessage({ text: "fresh" });
    expect((await r.nthInbound(1)).content).toBe("fresh");
    expect(r.inbound).toHaveLength(1);
  });
});

describe("inbound", () => {
  it("publishes a private text message with ids, session and reply metadata", async () => {
    const { fake, nthInbound } = await started();
    const sent = fake.userMessage({ text: "hello there" });
    expect(await nthInbound(1)).toEqual({
      channel: "telegram",
      senderId: "42",
      chatId: "42",
      content: "hello there",
      sessionKey: "telegram:42",
      messageId: String(sent.message_id),
      senderAliases: ["@ada"],
      isGroup: false,
      metadata: { chatType: "private" },
    });
  });

  it("takes the updates of one getUpdates batch an event-loop turn apart, so what one started goes out before the next", async () => {
    r = await rig();
    // Queued while it was down: the first getUpdates brings all five at once.
    for (let i = 0; i < 5; i++)
      r.fake.userMessage({ text: `m${i}`, from: { id: 100 + i, first_name: `u${i}` } });
    const published: string[] = [];
    // For each message: had the event loop turned since the one before was taken? Only then has a
    // socket write that message started (its turn's LLM request) been made.
    const loopTurnedBefore: boolean[] = [];
    let turned = true;
    const lifetime = new AbortController();
    await r.channel.start(
      {
        allows: () => true,
        refuse: () => undefined,
        publishInbound: (m) => {
          loopTurnedBefore.push(turned);
          turned = false;
          setImmediate(() => (turned = true));
          published.push(m.content);
        },
      },
      lifetime.signal,
    );
    await r.fake.waitFor(() => published.length === 5 || undefined, 5000, "five messages");
    expect(published).toEqual(["m0", "m1", "m2", "m3", "m4"]);
    expect(loopTurnedBefore).toEqual([true, true, true, true, true]);
    lifetime.abort();
  });

  it("in groups (mention policy): ignores chatter, takes mentions (stripped), replies to the bot and /cmd@bot", async () => {
    const { fake, inbound, nthInbound, channel } = await started();
    fake.userMessage({ chat: GROUP, text: "just chatting among us" });
    fake.userMessage({
      chat: GROUP,
      text: "@palaver_test_bot what is 2+2?",
      entities: [{ type: "mention", offset: 0, length: 18 }],
    });
    expect((await nthInbound(1)).content).toBe("what is 2+2?");
    expect(inbound[0]!.sessionKey).toBe(`telegram:${GROUP.id}`);

    await channel.send({
      channel: "telegram",
      chatId: String(GROUP.id),
      content: "4",
      metadata: inbound[0]!.metadata,
    });
    const botMessage = await fake.waitForSent((m) => m.text === "4");
    fake.userMessage({
      chat: GROUP,
      text: "and times 3?",
      reply_to_message: {
        message_id: botMessage.messageId,
        date: 1,
        chat: GROUP,
        from: { ...fake.bot },
        text: "4",
      },
    });
    expect((await nthInbound(2)).content).toBe("[Reply to your earlier message: 4]\nand times 3?");
    fake.userMessage({ chat: GROUP, text: "/new@palaver_test_bot" });
    fake.userMessage({ chat: GROUP, text: "/new@some_other_bot" });
    expect((await nthInbound(3)).content).toBe("/new");
    fake.userMessage({ chat: GROUP, text: "last chatter" });
    fake.userMessage({ text: "private marker" });
    await nthInbound(4);
    expect(inbound.map((m) => m.content)).toEqual([
      "what is 2+2?",
      "[Reply to your earlier message: 4]\nand times 3?",
      "/new",
      "private marker",
    ]);
  });

  it("routes a forum topic to its own session and replies in that topic", async () => {
    const { fake, nthInbound, channel } = await started({
      config: { groupPolicy: "open", replyToMessage: true },
    });
    const sent = fake.userMessage({
      chat: FORUM,
      text: "in the topic",
      message_thread_id: 55,
      is_topic_message: true,
      reply_to_message: {
        message_id: 55,
        date: 1,
        chat: FORUM,
        forum_topic_created: { name: "Plans", icon_color: 1 },
      },
    });
    const msg = await nthInbound(1);
    expect(msg.sessionKey).toBe(`telegram:${FORUM.id}:55`);
    expect(msg.content).toBe("in the topic");
    expect(msg.threadId).toBe("55");
    await channel.send({
      channel: "telegram",
      chatId: msg.chatId,
      content: "answer **here**",
      replyTo: String(sent.message_id),
      ...(msg.threadId ? { threadId: msg.threadId } : {}),
      metadata: msg.metadata,
    });
    const reply = await fake.waitForSent();
    expect(reply).toMatchObject({
      chatId: FORUM.id,
      threadId: 55,
      replyTo: sent.message_id,
      parseMode: "HTML",
      text: "answer <b>here</b>",
    });
  });

  it("includes the quoted text of the message replied to", async () => {
    const { fake, nthInbound } = await started();
    fake.userMessage({
      text: "what did you mean?",
      reply_to_message: {
        message_id: 3,
        date: 1,
        chat: { id: 42, type: "private" },
        from: { id: 7, is_bot: false, first_name: "Bob" },
        text: "The meeting moved to Friday",
      },
      quote: { text: "Friday", position: 21 },
    });
    expect((await nthInbound(1)).content).toBe("[Reply to Bob: Friday]\nwhat did you mean?");
  });

  it("downloads the largest photo size into the workspace and passes it as media", async () => {
    const { fake, nthInbound, workspace } = await started();
    const small = fake.addFile("small-bytes");
    const big = fake.addFile(Buffer.from("\x89PNG big picture bytes"), { path: "photos/file_9.jpg" });
    fake.userMessage({
      caption: "what is this?",
      photo: [
        { ...small, width: 90, height: 60 },
        { ...big, width: 1280, height: 853 },
      ],
    });
    const msg = await nthInbound(1);
    expect(msg.content).toBe("what is this?");
    expect(msg.media).toHaveLength(1);
    const path = msg.media![0]!;
    expect(path.startsWith(join(workspace, "media", "telegram"))).toBe(true);
    expect(path).toMatch(/photo-u2\.jpg$/);
    expect(await readFile(path, "utf8")).toBe("\x89PNG big picture bytes");
    expect(fake.callsTo("getFile").map((c) => c.params.file_id)).toEqual([big.file_id]);
  });

  it("reserves a message with files in the journal before downloading them, then publishes it through the reservation", async () => {
    r = await rig();
    const { events, published, lifetime } = await startReserving(
      (m) => `reserve:${m.content}:${r!.fake.callsTo("getFile").length}`,
    );
    try {
      const photo = r.fake.addFile("bytes", { path: "photos/p.jpg" });
      r.fake.userMessage({ caption: "see this", photo: [{ ...photo, width: 10, height: 10 }] });
      await r.fake.waitFor(() => published.length === 1);
      // Reserved before any download started; the finished message carries the file.
      expect(events).toEqual([`reserve:see this\n${INTERRUPTED_DOWNLOAD_NOTE}:0`, "publish"]);
      expect(published[0]!.media).toHaveLength(1);
    } finally {
      lifetime.abort();
    }
  });

  it("downloads a document, and refuses one over the size limit with a message to the user", async () => {
    const { fake, nthInbound } = await started({ maxMediaBytes: 100 });
    const doc = fake.addFile("a small text file");
    fake.userMessage({ document: { ...doc, file_name: "notes.txt", mime_type: "text/plain" } });
    const first = await nthInbound(1);
    expect(first.content).toBe("[file]");
    expect(await readFile(first.media![0]!, "utf8")).toBe("a small text file");
    expect(first.media![0]).toMatch(/notes\.txt$/);

    const huge = fake.addFile(Buffer.alloc(500, 1));
    const sent = fake.userMessage({ caption: "please read", document: { ...huge, file_name: "big.pdf" } });
    const second = await nthInbound(2);
    expect(second.media).toBeUndefined();
    expect(second.content).toMatch(
      /^please read\n\[file "big\.pdf" not downloaded: the file is larger than the 100 bytes limit\]$/,
    );
    const notice = await fake.waitForSent((m) => m.text?.includes("big.pdf") ?? false);
    expect(notice.text).toMatch(/can't take files over 100 bytes/);
    expect(notice.replyTo).toBe(sent.message_id);
    // Refused by the declared size: never even asked Telegram for it.
    expect(fake.callsTo("getFile")).toHaveLength(1);
  });

  it("transcribes a voice note through the configured /audio/transcriptions endpoint", async () => {
    const fake = await FakeTelegram.start();
    const config = ConfigSchema.parse({
      providers: { whisper: { apiBase: fake.transcriptionBaseURL, apiKey: "k" } },
      transcription: { provider: "whisper", model: "whisper-large" },
    });
    r = await rig({ fake, transcriber: createTranscriber(config) });
    await r.start();
    fake.transcript = "remind me to buy milk";
    const voice = fake.addFile(Buffer.from("OggS fake opus"));
    fake.userMessage({ voice: { ...voice, duration: 2, mime_type: "audio/ogg" } });
    const msg = await r.nthInbound(1);
    expect(msg.content).toBe("[voice message, transcribed: remind me to buy milk]");
    expect(msg.media).toHaveLength(1);
    expect(fake.transcriptions).toHaveLength(1);
    expect(fake.transcriptions[0]).toMatchObject({ model: "whisper-large", size: 14 });
    expect(fake.transcriptions[0]!.fileName).toMatch(/^\d{8}-[0-9a-f]{8}-voice-.*\.ogg$/);
  });

  it("references the voice file when transcription is off", async () => {
    const { fake, nthInbound } = await started();
    const voice = fake.addFile(Buffer.from("OggS"));
    fake.userMessage({ voice: { ...voice, duration: 1 } });
    const msg = await nthInbound(1);
    expect(msg.content).toBe("[voice message]");
    expect(msg.media![0]).toMatch(/\.ogg$/);
  });

  it("turns an album into one message with every file", async () => {
    const { fake, nthInbound, inbound } = await started();
    for (let i = 1; i <= 3; i++) {
      const f = fake.addFile(`picture ${i}`);
      fake.userMessage({
        media_group_id: "album-1",
        photo: [{ ...f, width: 100, height: 100 }],
        ...(i === 1 ? { caption: "holiday" } : {}),
      });
    }
    fake.userMessage({ text: "after the album" });
    const album = await nthInbound(1);
    expect(album.content).toBe("holiday");
    expect(album.media).toHaveLength(3);
    expect(await Promise.all(album.media!.map((p) => readFile(p, "utf8")))).toEqual([
      "picture 1",
      "picture 2",
      "picture 3",
    ]);
    expect((await nthInbound(2)).content).toBe("after the album");
    expect(inbound).toHaveLength(2);
  });

  it("reserves an album once, when its first part arrives, and publishes the whole album through it", async () => {
    r = await rig();
    const { events, published, lifetime } = await startReserving(() => "reserve");
    try {
      for (let i = 1; i <= 2; i++) {
        const f = r.fake.addFile(`picture ${i}`);
        r.fake.userMessage({ media_group_id: "album-2", photo: [{ ...f, width: 9, height: 9 }] });
      }
      await r.fake.waitFor(() => published.length === 1);
      expect(events).toEqual(["reserve", "publish"]);
      expect(published[0]!.media).toHaveLength(2);
    } finally {
      lifetime.abort();
    }
  });

  it("cancels the reservation of a group album no part of which is for the bot, fetching nothing", async () => {
    r = await rig();
    const { events, published, lifetime } = await startReserving(() => "reserve");
    try {
      for (let i = 1; i <= 2; i++) {
        const f = r.fake.addFile(`holiday ${i}`);
        r.fake.userMessage({
          chat: GROUP,
          media_group_id: "album-3",
          photo: [{ ...f, width: 9, height: 9 }],
        });
      }
      await r.fake.waitFor(() => events.includes("cancel"), 5000, "the cancelled reservation");
      expect(events).toEqual(["reserve", "cancel"]);
      expect(published).toEqual([]);
      expect(r.fake.callsTo("getFile")).toHaveLength(0);
    } finally {
      lifetime.abort();
    }
  });

  it("does not download files from senders who are not allowed (the manager refuses them)", async () => {
    const { fake, inbound, refused } = await started();
    const f = fake.addFile("secret");
    fake.userMessage({ from: { id: 7, first_name: "Mallory" }, document: { ...f, file_name: "x.bin" } });
    const msg = await fake.waitFor(() => refused[0], 5000, "the refusal");
    expect(msg.senderId).toBe("7");
    expect(msg.media).toBeUndefined();
    expect(inbound).toEqual([]);
    expect(fake.callsTo("getFile")).toHaveLength(0);
  });

  it("greets an allowed /start itself; a refused one goes to the manager's notice limiter", async () => {
    const { fake, inbound, refused } = await started();
    fake.userMessage({ text: "/start" });
    const hello = await fake.waitForSent((m) => m.chatId === 42);
    expect(hello.text).toMatch(/^Hello! I'm @palaver_test_bot/);
    expect(hello.text).toContain("Your Telegram user id is 42");
    expect(inbound).toHaveLength(0);
    fake.userMessage({ text: "/start", from: { id: 7, first_name: "Mallory" } });
    const mallory = await fake.waitFor(() => refused[0], 5000, "the refusal");
    expect(mallory).toMatchObject({ senderId: "7", content: "/start" });
    expect(inbound).toHaveLength(0);
    // The adapter sends nothing to a refused sender on its own.
    expect(fake.sent.filter((m) => m.chatId === 7)).toEqual([]);
  });

  it("takes an allowed /start through the inbound path: greeted in the chat's order, after the voice note before it", async () => {
    const transcribing = createGate();
    let transcriptions = 0;
    r = await rig({
      transcriber: {
        transcribe: async () => (transcriptions++, await transcribing.opened, "hello"),
      },
    });
    const fake = r.fake;
    const greeted = () => fake.sent.some((m) => m.chatId === 42 && /^Hello!/.test(m.text ?? ""));
    const published: { content: string; greetedBefore: boolean }[] = [];
    const refused: InboundMessage[] = [];
    const lifetime = new AbortController();
    await r.channel.start(
      {
        allows: (m) => m.senderId === "42",
        publishInbound: (m) => published.push({ content: m.content, greetedBefore: greeted() }),
        refuse: (m) => refused.push(m),
      },
      lifetime.signal,
    );
    try {
      const voice = fake.addFile(Buffer.from("OggS fake opus"));
      fake.userMessage({ voice: { ...voice, duration: 2, mime_type: "audio/ogg" } });
      fake.userMessage({ text: "/start" });
      // A later update, handled after /start: by then /start was taken, and waits behind the voice note.
      fake.userMessage({ text: "hi", from: { id: 7, first_name: "Mallory" } });
      await fake.waitFor(() => refused.length === 1 && transcriptions === 1, 5000, "/start taken");
      expect(greeted()).toBe(false);
      transcribing.open();
      await fake.waitForSent((m) => m.chatId === 42 && /^Hello!/.test(m.text ?? ""));
      expect(published).toEqual([{ content: "[voice message, transcribed: hello]", greetedBefore: false }]);
    } finally {
      lifetime.abort();
    }
  });

  it("a refused sender's /start goes through the one notice limiter: twice /start, one notice", async () => {
    r = await rig();
    const fake = r.fake;
    // Counts every refusal the manager sees, so the test knows when Mallory's messages are all handled.
    let refusals = 0;
    const notices = new (class extends NoticeLimiter {
      override shouldNotify(channel: string, senderId: string): boolean {
        refusals++;
        return super.shouldNotify(channel, senderId);
      }
    })();
    const manager = new ChannelManager({
      bus: new MessageBus(),
      sendProgress: false,
      sendToolHints: false,
      notices,
    });
    manager.add(r.channel, { allowFrom: ["42"] });
    await manager.start();
    try {
      const mallory = { id: 7, first_name: "Mallory" };
      fake.userMessage({ text: "/start", from: mallory });
      fake.userMessage({ text: "/start", from: mallory });
      fake.userMessage({ text: "let me in", from: mallory });
      await waitFor(() => refusals === 3, 5000, "three refusals");
      await manager.flush(5000);
      const toMallory = fake.sent.filter((m) => m.chatId === 7);
      expect(toMallory).toHaveLength(1);
      expect(toMallory[0]!.text).toContain("Your telegram user id is 7");
    } finally {
      await manager.stop(1000);
    }
  });

  it("publishes /stop at once, even while an earlier message of the chat is still downloading", async () => {
    const { fake, nthInbound } = await started();
    const f = fake.addFile("slow");
    fake.failNext("getFile", { code: 500, description: "Internal Server Error" }); // auto-retry waits 3 s
    fake.userMessage({ document: { ...f, file_name: "slow.txt" } });
    await fake.waitForCall("getFile");
    fake.userMessage({ text: "/stop" });
    const first = await nthInbound(1, 2000);
    expect(first.content).toBe("/stop");
  });
});

describe("sending", () => {
  it("splits a long markdown reply into valid HTML messages (the fake parses them like Telegram)", async () => {
    const { fake, channel } = await started();
    const code = Array.from({ length: 150 }, (_, i) => `  if (x${i} < y && z > w) return ${i};`).join("\n");
    const content = `**Summary** & details\n\n\`\`\`js\nfunction f() {\n${code}\n}\n\`\`\`\n\n${"More _text_ here. ".repeat(60)}`;
    expect(content.length).toBeGreaterThan(6000);
    await channel.send({ channel: "telegram", chatId: "42", content });
    expect(fake.sent.length).toBeGreaterThan(1);
    for (const m of fake.sent) {
      expect(m.parseMode).toBe("HTML");
      expect(m.text!.length).toBeLessThanOrEqual(4096);
    }
    expect(fake.sent[0]!.text).toMatch(/^<b>Summary<\/b> &amp; details/);
    expect(fake.callsTo("sendMessage")).toHaveLength(fake.sent.length); // none refused
  });

  it("resends as plain text when Telegram rejects the HTML", async () => {
    const { fake, channel } = await started();
    fake.failNext("sendMessage", {
      code: 400,
      description: 'Bad Request: can\'t parse entities: Unsupported start tag "b" at byte offset 0',
    });
    await channel.send({ channel: "telegram", chatId: "42", content: "**bold** move" });
    expect(fake.callsTo("sendMessage").map((c) => c.params.parse_mode)).toEqual(["HTML", undefined]);
    expect(fake.sent).toHaveLength(1);
    expect(fake.sent[0]).toMatchObject({ text: "**bold** move" });
    expect(fake.sent[0]!.parseMode).toBeUndefined();
  });

  it("waits as long as a 429 retry_after says, then sends", async () => {
    const { fake, channel } = await started();
    fake.failNext("sendMessage", {
      code: 429,
      description: "Too Many Requests: retry after 1",
      retryAfter: 1,
    });
    await channel.send({ channel: "telegram", chatId: "42", content: "patience" });
    const calls = fake.callsTo("sendMessage");
    expect(calls).toHaveLength(2);
    // The retry waited out retry_after: one sent sooner would have met another 429.
    expect(fake.earlyRetries).toEqual([]);
    expect(fake.sent[0]!.text).toBe("patience");
  });

  it("keeps to Telegram's per-chat send limits (private chat, group), each part in order, no early retry", async () => {
    const { fake, channel } = await started();
    // Telegram's limits, scaled down: one message per 200 ms in a private chat, three per 300 ms in a group.
    fake.sendLimits = {
      privateChat: { count: 1, windowMs: 200 },
      group: { count: 3, windowMs: 300 },
    };
    const parts = (tag: string, n: number) =>
      Array.from({ length: n }, (_, i) => `${tag}${i} ${"x".repeat(3500)}`).join("\n\n");
    await channel.send({ channel: "telegram", chatId: "42", content: parts("p", 3) });
    await channel.send({ channel: "telegram", chatId: "-100", content: parts("g", 5) });
    expect(fake.sent.map((m) => `${String(m.chatId)} ${(m.text ?? "").split(" ")[0]}`)).toEqual([
      "42 p0",
      "42 p1",
      "42 p2",
      "-100 g0",
      "-100 g1",
      "-100 g2",
      "-100 g3",
      "-100 g4",
    ]);
    expect(fake.sendsLimited).toBeGreaterThanOrEqual(3);
    expect(fake.earlyRetries).toEqual([]);
  });

  it("quotes the user's message when replyToMessage is on, only on the first chunk", async () => {
    const { fake, channel } = await started({ config: { replyToMessage: true } });
    await channel.send({
      channel: "telegram",
      chatId: "42",
      content: `${"a".repeat(3000)}\n\n${"b".repeat(3000)}`,
      replyTo: "17",
    });
    expect(fake.sent.map((m) => m.replyTo)).toEqual([17, undefined]);
  });

  it("does not quote when replyToMessage is off", async () => {
    const { fake, channel } = await started();
    await channel.send({
      channel: "telegram",
      chatId: "42",
      content: "hi",
      replyTo: "17",
    });
    expect(fake.sent[0]!.replyTo).toBeUndefined();
  });

  it("sends progress and tool hints as small plain silent messages", async () => {
    const { fake, channel } = await started();
    await channel.send({ channel: "telegram", chatId: "42", content: 'read_file("a<b")', kind: "toolHint" });
    expect(fake.sent[0]).toMatchObject({ text: 'read_file("a<b")', silent: true });
    expect(fake.sent[0]!.parseMode).toBeUndefined();
  });

  it("sends media by type, a short reply as the caption", async () => {
    const { fake, channel, workspace } = await started();
    const photo = join(workspace, "chart.png");
    const doc = join(workspace, "report.pdf");
    await writeFile(photo, "png-bytes");
    await writeFile(doc, "pdf-bytes");
    await channel.send({ channel: "telegram", chatId: "42", content: "Here **it** is", media: [photo, doc] });
    expect(fake.sent.map((m) => m.method)).toEqual(["sendPhoto", "sendDocument"]);
    expect(fake.sent[0]).toMatchObject({ caption: "Here <b>it</b> is", parseMode: "HTML" });
    expect(fake.sent[0]!.file).toMatchObject({ name: "chart.png", size: 9 });
    expect(fake.sent[1]!.file!.data.toString()).toBe("pdf-bytes");
    expect(fake.sent[1]!.caption).toBeUndefined();
  });

  it("says so in the chat when a file to send is missing", async () => {
    const { fake, channel, workspace } = await started();
    await channel.send({
      channel: "telegram",
      chatId: "42",
      content: "attached",
      media: [join(workspace, "gone.pdf")],
    });
    expect(fake.sent.map((m) => m.text)).toEqual([
      "attached",
      "(I couldn't send gone.pdf: the file is missing.)",
    ]);
  });

  it("reports a refused send in plain words", async () => {
    const { fake, channel } = await started();
    fake.failNext("sendMessage", { code: 403, description: "Forbidden: bot was blocked by the user" });
    await expect(channel.send({ channel: "telegram", chatId: "42", content: "hi" })).rejects.toThrow(
      /sending to Telegram chat 42 failed: Telegram refused sendMessage: Forbidden: bot was blocked by the user/,
    );
  });

  it("a reply to a user who blocked the bot fails permanently at once", async () => {
    const { fake, channel } = await started();
    fake.failNext("sendMessage", { code: 403, description: "Forbidden: bot was blocked by the user" });
    const err = await channel
      .send({ channel: "telegram", chatId: "42", content: "hi" })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ChannelError);
    expect(err).toMatchObject({ platform: "telegram", method: "sendMessage", code: 403, permanent: true });
    expect(fake.callsTo("sendMessage")).toHaveLength(1);
  });

  it.each([
    [403, "Forbidden: user is deactivated"],
    [403, "Forbidden: bot was kicked from the group chat"],
    [400, "Bad Request: chat not found"],
    [400, "Bad Request: have no rights to send a message"],
  ])("%i %s is permanent", async (code, description) => {
    const { fake, channel } = await started();
    fake.failNext("sendMessage", { code, description });
    await expect(channel.send({ channel: "telegram", chatId: "42", content: "hi" })).rejects.toMatchObject({
      code,
      permanent: true,
    });
  });

  it("a long 429 fails at once with retryAfterMs instead of waiting inside the call", async () => {
    const { fake, channel } = await started();
    fake.failNext("sendMessage", {
      code: 429,
      description: "Too Many Requests: retry after 120",
      retryAfter: 120,
    });
    await expect(channel.send({ channel: "telegram", chatId: "42", content: "later" })).rejects.toMatchObject(
      {
        code: 429,
        permanent: false,
        retryAfterMs: 120_000,
      },
    );
    expect(fake.callsTo("sendMessage")).toHaveLength(1);
  });

  it("retries in the new chat when a group was upgraded to a supergroup", async () => {
    const { fake, channel } = await started();
    fake.failNext("sendMessage", {
      code: 400,
      description: "Bad Request: group chat was upgraded to a supergroup chat",
      migrateTo: -100999,
    });
    await channel.send({ channel: "telegram", chatId: "-55", content: "hi" });
    expect(fake.sent[0]!.chatId).toBe(-100999);
  });
});

describe("typing indicator", () => {
  const turn = (kind: TurnEvent["kind"], turnId: string, threadId?: string): TurnEvent => ({
    kind,
    turnId,
    channel: "telegram",
    chatId: "42",
    ...(threadId ? { threadId } : {}),
    ...(kind === "turnEnd" ? { outcome: "done" as const } : {}),
  });
  const typingCalls = (fake: FakeTelegram) => fake.callsTo("sendChatAction").length;

  it("repeats from turnStart to the turnEnd of that turn, through progress messages", async () => {
    const { fake, channel, nthInbound } = await started();
    fake.userMessage({ text: "think hard" });
    const msg = await nthInbound(1);
    expect(typingCalls(fake)).toBe(0); // a message alone starts nothing: the turn does
    channel.onTurn(turn("turnStart", "t1", msg.threadId));
    await fake.waitFor(() => typingCalls(fake) >= 3, 3000, "repeated typing");
    expect(fake.callsTo("sendChatAction")[0]!.params).toMatchObject({ chat_id: 42, action: "typing" });
    await channel.send({
      channel: "telegram",
      chatId: "42",
      content: "working…",
      kind: "progress",
      turnId: "t1",
    });
    const afterProgress = typingCalls(fake);
    await fake.waitFor(() => typingCalls(fake) >= afterProgress + 2, 3000, "typing after progress");
    await channel.send({
      channel: "telegram",
      chatId: "42",
      content: "done",
      turnId: "t1",
      metadata: msg.metadata,
    });
    expect(channel.isTyping("42")).toBe(true); // the reply alone does not end the turn
    channel.onTurn(turn("turnEnd", "t1"));
    await fake.waitFor(() => !channel.isTyping("42"), 3000, "typing ended");
  });

  it("a cron reply arriving in the chat does not switch off the typing of a turn still running there", async () => {
    const { fake, channel } = await started();
    channel.onTurn(turn("turnStart", "t1"));
    await fake.waitFor(() => typingCalls(fake) >= 1, 3000, "typing");
    await channel.send({ channel: "telegram", chatId: "42", content: "Reminder: water the plants" });
    expect(channel.isTyping("42")).toBe(true);
    // Telegram hid the indicator under the reminder: it is shown again.
    const afterReminder = typingCalls(fake);
    await fake.waitFor(() => typingCalls(fake) > afterReminder, 3000, "typing renewed");
    channel.onTurn(turn("turnEnd", "t1"));
    await fake.waitFor(() => !channel.isTyping("42"), 3000, "typing ended");
  });

  it("shows nothing for background turns, and keeps forum topics apart", async () => {
    const { fake, channel } = await started();
    channel.onTurn({ ...turn("turnStart", "cron-1"), background: true });
    channel.onTurn(turn("turnStart", "t2", "55"));
    await fake.waitFor(() => typingCalls(fake) >= 1, 3000, "typing in the topic");
    expect(channel.isTyping("42")).toBe(false);
    expect(channel.isTyping("42", 55)).toBe(true);
    expect(fake.callsTo("sendChatAction")[0]!.params).toMatchObject({ message_thread_id: 55 });
  });

  it("gives up after the maximum duration", async () => {
    const { fake, channel } = await started({ tuning: { typingMaxMs: 250 } });
    channel.onTurn(turn("turnStart", "never-ends"));
    await fake.waitFor(() => typingCalls(fake) >= 1, 3000, "typing");
    await fake.waitFor(() => !channel.isTyping("42"), 3000, "typing given up");
  });
});

describe("video", () => {
  it("is downloaded and referenced", async () => {
    const { fake, nthInbound } = await started();
    const f = fake.addFile("x");
    fake.userMessage({ video: { ...f, width: 1, height: 1, duration: 1 } });
    const msg = await nthInbound(1);
    expect((await stat(msg.media![0]!)).isFile()).toBe(true);
    expect(msg.content).toBe("[video]");
  });
});
