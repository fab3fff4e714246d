/**
 * The Discord adapter on its own (real discord.js against FakeDiscord): connection
 * failures in plain words, rate limits, files, reply references, interactions.
 */
import { INTERRUPTED_DOWNLOAD_NOTE } from "../../../src/channels/inbound.js";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { InboundMessage, TurnEvent } from "../../../src/bus/types.js";
import { MessageBus } from "../../../src/bus/bus.js";
import {
  createDiscordChannel,
  DiscordChannel,
  type DiscordChannelOptions,
} from "../../../src/channels/discord/adapter.js";
import { ConfigSchema } from "../../../src/config/schema.js";
import { DiscordConfigSchema } from "../../../src/config/platforms/discord.js";
import { isAllowed } from "../../../src/channels/access.js";
import { ChannelManager } from "../../../src/channels/manager.js";
import { createTranscriber } from "../../../src/channels/transcription.js";
import { ChannelError } from "../../../src/util/errors.js";
import { FakeDiscord, type FakeDiscordOptions } from "../../fakes/discord-server.js";

let dir: string;
let fake: FakeDiscord | undefined;
let channel: DiscordChannel | undefined;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-discord-adapter-"));
});
afterEach(async () => {
  await channel?.stop();
  channel = undefined;
  await fake?.close();
  fake = undefined;
  await rm(dir, { recursive: true, force: true });
});

async function setup(
  opts: {
    fake?: FakeDiscordOptions;
    discord?: Record<string, unknown>;
    adapter?: Partial<DiscordChannelOptions>;
  } = {},
) {
  fake = await FakeDiscord.start(opts.fake);
  const guild = fake.addGuild({ name: "home", channels: ["general"] });
  const alice = fake.addUser("alice");
  const config = DiscordConfigSchema.parse({
    enabled: true,
    token: fake.token,
    apiUrl: fake.apiUrl,
    allowFrom: ["*"],
    ...opts.discord,
  });
  channel = new DiscordChannel({
    config,
    workspace: join(dir, "ws"),
    maxMediaBytes: 1024 * 1024,
    connectTimeoutMs: 60_000, // only ends a hung test: a loaded machine can take seconds to connect
    typingIntervalMs: 30,
    ...opts.adapter,
  });
  const inbound: InboundMessage[] = [];
  // The gate as the channel manager answers it.
  const allows = (m: InboundMessage) => isAllowed(m, config.allowFrom);
  // A refused message is recorded with the others: tests look for it among the inbound ones.
  const sink = {
    allows,
    publishInbound: (m: InboundMessage) => inbound.push(m),
    refuse: (m: InboundMessage) => inbound.push(m),
  };
  return { fake, channel, guild, general: guild.channels[0]!, alice, inbound, sink, allows };
}

const never = () => new AbortController().signal;

function turn(kind: TurnEvent["kind"], chatId: string, turnId: string, background = false): TurnEvent {
  return {
    kind,
    turnId,
    channel: "discord",
    chatId,
    ...(background ? { background } : {}),
    ...(kind === "turnEnd" ? { outcome: "done" as const } : {}),
  };
}

describe("createDiscordChannel (the registry's factory)", () => {
  it("builds the channel from the config, and refuses an empty token in plain words", async () => {
    const config = ConfigSchema.parse({
      channels: { discord: { enabled: true, token: "t0k" } },
    });
    const ctx = { config, workspace: dir, log: pino({ level: "silent" }) };
    expect(await createDiscordChannel(ctx)).toBeInstanceOf(DiscordChannel);
    const empty = ConfigSchema.parse({ channels: { discord: { enabled: true, token: " " } } });
    await expect(createDiscordChannel({ ...ctx, config: empty })).rejects.toThrow(
      /channels\.discord\.token is empty/,
    );
  });
});

describe("DiscordChannel: connecting", () => {
  it("rejects start() in plain words when the token is wrong (401 from the API), without touching the gateway", async () => {
    const { channel, fake, sink } = await setup({ discord: { token: "wrong-token" } });
    const err = await channel.start(sink, never()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ChannelError);
    expect((err as Error).message).toMatch(
      /^Discord rejected the bot token\. Check channels\.discord\.token/,
    );
    expect((err as Error).message).toContain("HTTP 401");
    expect(fake.connections).toHaveLength(0);
  });

  it("rejects start() when the gateway refuses the token (close 4004)", async () => {
    const { channel, fake, sink } = await setup();
    fake.failNextIdentify = 4004;
    await expect(channel.start(sink, never())).rejects.toThrow(/rejected the bot token.*gateway close 4004/);
  });

  it("rejects start() naming the Message Content intent when Discord disallows it (close 4014)", async () => {
    const { channel, sink } = await setup({ fake: { allowedPrivilegedIntents: 0 } });
    await expect(channel.start(sink, never())).rejects.toThrow(/Message Content Intent/);
  });

  it("connects without the privileged intent when channels.discord.intents leaves it out", async () => {
    const { channel, fake, sink } = await setup({
      fake: { allowedPrivilegedIntents: 0 },
      discord: { intents: 1 | 512 | 4096 },
    });
    await channel.start(sink, never());
    expect((fake.framesWithOp(2)[0]!.d as { intents: number }).intents).toBe(4609);
  });

  it("is retried by the channel manager until it connects", async () => {
    const { channel, fake } = await setup();
    fake.failNextIdentify = 4004;
    const bus = new MessageBus();
    const manager = new ChannelManager({
      bus,
      sendProgress: false,
      sendToolHints: false,
      retryBaseMs: 20,
      retryMaxMs: 50,
    });
    manager.add(channel, { allowFrom: ["*"] });
    try {
      await manager.start();
      await fake.waitFor(() => manager.status()[0]!.state === "running", 5000, "the retry");
      expect(fake.identifies).toBe(2);
    } finally {
      await manager.stop(100);
    }
  });

  it("stops waiting when start is cancelled", async () => {
    const { channel, sink } = await setup();
    const controller = new AbortController();
    controller.abort();
    await expect(channel.start(sink, controller.signal)).rejects.toThrow(/cancelled/);
  });

  it("heartbeats as told by HELLO, gets ACKs and keeps one connection", async () => {
    // Not much shorter: a heartbeat whose ACK the stalled event loop has not read before the next one is due
    // counts as a dead connection to discord.js, and a loaded machine stalls for a few hundred ms.
    const { channel, fake, sink } = await setup({ fake: { heartbeatIntervalMs: 500 } });
    await channel.start(sink, never());
    await fake.waitFor(() => fake.heartbeats >= 3, 3000, "three heartbeats");
    expect(fake.connections).toHaveLength(1);
  });

  it("identifies again when the session cannot be resumed, logs it, and keeps receiving", async () => {
    const logs: string[] = [];
    const log = pino(
      { level: "info" },
      { write: (line: string) => logs.push((JSON.parse(line) as { msg: string }).msg) },
    );
    const { channel, fake, sink, inbound, alice } = await setup({ adapter: { log } });
    await channel.start(sink, never());
    fake.closeGateway(1000); // discord.js starts over with a new session
    // discord.js spaces IDENTIFYs 5 s apart (Discord's identify rate limit), so this one waits.
    await fake.waitFor(() => fake.identifies === 2 && fake.liveConnection, 8000, "the new session");
    fake.userMessage({ channelId: fake.dmChannel(alice).id, author: alice, content: "still there?" });
    await fake.waitFor(() => inbound.length === 1, 5000, "the message after reconnecting");
    expect(fake.resumes).toBe(0);
    expect(logs).toEqual(
      expect.arrayContaining([
        "Discord gateway connection lost; reconnecting",
        "Discord gateway reconnected with a new session",
      ]),
    );
  }, 15_000);

  it("closes the gateway on stop() and sends nothing afterwards", async () => {
    const { channel, fake, sink, general } = await setup();
    await channel.start(sink, never());
    const connection = fake.connections[0]!;
    await channel.stop();
    await fake.waitFor(() => connection.closeCode !== undefined, 2000, "the close");
    expect(connection.closeCode).toBe(1000);
    await expect(channel.send({ channel: "discord", chatId: general.id, content: "late" })).rejects.toThrow(
      /not connected/,
    );
  });
});

describe("DiscordChannel: sending", () => {
  it("waits out a 429 in discord.js's REST queue and drops nothing, in order", async () => {
    const { channel, fake, sink, general } = await setup();
    await channel.start(sink, never());
    fake.rateLimitNext({ method: "POST", path: /\/channels\/\d+\/messages$/, retryAfter: 0.15 });
    const long = Array.from({ length: 3 }, (_, i) => `part ${i} ${"x".repeat(1900)}`).join("\n\n");
    await channel.send({ channel: "discord", chatId: general.id, content: long });
    const posts = fake.calls("POST", `/channels/${general.id}/messages`);
    expect(posts.map((r) => r.status)).toEqual([429, 200, 200, 200]);
    // The retry waited out retry_after: one sent sooner would have met another 429.
    expect(fake.earlyRetries).toEqual([]);
    expect(fake.sent.map((m) => m.content.slice(0, 6))).toEqual(["part 0", "part 1", "part 2"]);
  });

  it("sends files as attachments and says which were missing", async () => {
    const { channel, fake, sink, general } = await setup();
    await channel.start(sink, never());
    const report = join(dir, "report.csv");
    await writeFile(report, "a,b\n1,2\n");
    await channel.send({
      channel: "discord",
      chatId: general.id,
      content: "Here you go",
      media: [report, join(dir, "gone.png")],
    });
    expect(fake.sent).toHaveLength(1);
    expect(fake.sent[0]!.content).toBe("Here you go\n\n(file not found: gone.png)");
    expect(fake.sent[0]!.files.map((f) => [f.name, f.data.toString()])).toEqual([
      ["report.csv", "a,b\n1,2\n"],
    ]);
    expect(fake.sent[0]!.message.attachments[0]!.filename).toBe("report.csv");
  });

  it("references the user's message on the first chunk of a final reply when replyToMessage is on", async () => {
    const { channel, fake, sink, general, alice, inbound } = await setup({
      discord: { replyToMessage: true },
    });
    await channel.start(sink, never());
    const question = fake.userMessage({
      channelId: general.id,
      author: alice,
      content: `<@${fake.bot.id}> hi`,
      mentions: [fake.bot],
    });
    await fake.waitFor(() => inbound.length === 1);
    expect(inbound[0]!.messageId).toBe(question.id);
    const base = { channel: "discord", chatId: general.id, replyTo: question.id };
    await channel.send({ ...base, content: "thinking…", kind: "progress" });
    await channel.send({ ...base, content: `${"a".repeat(1990)}\n\n${"b".repeat(100)}` });
    expect(fake.sent.map((m) => m.replyTo)).toEqual([undefined, question.id, undefined]);
  });

  it("sends to a DM channel it has not seen since starting (fetched from the API)", async () => {
    const { channel, fake, sink, alice } = await setup();
    await channel.start(sink, never());
    const dm = fake.dmChannel(alice);
    await channel.send({ channel: "discord", chatId: dm.id, content: "reminder: stretch" });
    expect(fake.calls("GET", `/channels/${dm.id}`)).toHaveLength(1);
    expect(fake.sent.map((m) => [m.channelId, m.content])).toEqual([[dm.id, "reminder: stretch"]]);
  });
});

describe("DiscordChannel: failures at the send point", () => {
  it("fails permanently when the user cannot be messaged (50007), so the outbox drops the reply", async () => {
    const { channel, fake, sink, alice } = await setup();
    await channel.start(sink, never());
    const dm = fake.dmChannel(alice);
    fake.failNext({
      method: "POST",
      path: /\/channels\/\d+\/messages$/,
      status: 403,
      code: 50007,
      message: "Cannot send messages to this user",
    });
    const err = await channel
      .send({ channel: "discord", chatId: dm.id, content: "hi" })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ChannelError);
    expect(err).toMatchObject({ platform: "discord", method: "createMessage", code: 50007, permanent: true });
    expect(fake.calls("POST", `/channels/${dm.id}/messages`)).toHaveLength(1);
  });

  it("fails permanently for a channel that does not exist (10003)", async () => {
    const { channel, sink } = await setup();
    await channel.start(sink, never());
    await expect(
      channel.send({ channel: "discord", chatId: "123456789012345678", content: "hi" }),
    ).rejects.toMatchObject({ method: "fetchChannel", code: 10003, permanent: true });
  });

  it("turns a long rate limit into a transient failure with retryAfterMs instead of waiting in discord.js's REST queue", async () => {
    const { channel, fake, sink, general } = await setup();
    await channel.start(sink, never());
    fake.rateLimitNext({ method: "POST", path: /\/channels\/\d+\/messages$/, retryAfter: 60 });
    const err = await channel
      .send({ channel: "discord", chatId: general.id, content: "hi" })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ChannelError);
    expect(err).toMatchObject({ code: 429, permanent: false });
    expect((err as ChannelError).retryAfterMs).toBeGreaterThanOrEqual(60_000);
    expect(fake.sent).toEqual([]);
  });

  it("gives a server error one retry inside discord.js's REST client, then fails transiently", async () => {
    const { channel, fake, sink, general } = await setup();
    await channel.start(sink, never());
    const path = /\/channels\/\d+\/messages$/;
    fake.failNext({ method: "POST", path, status: 500, code: 0, message: "Internal Server Error", count: 5 });
    const err = await channel
      .send({ channel: "discord", chatId: general.id, content: "hi" })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ platform: "discord", permanent: false, code: 500 });
    expect(fake.calls("POST", `/channels/${general.id}/messages`)).toHaveLength(2);
  });
});

describe("DiscordChannel: typing follows the turn", () => {
  it("a cron reply in a chat does not end the typing of a turn still running there", async () => {
    // The bug: any final reply ended typing (typing.end on kind "final"), a reminder's too.
    const { channel, fake, sink, alice } = await setup();
    await channel.start(sink, never());
    const dm = fake.dmChannel(alice);
    const typingPosts = () => fake.calls("POST", `/channels/${dm.id}/typing`).length;
    channel.onTurn(turn("turnStart", dm.id, "t1"));
    await fake.waitFor(() => typingPosts() >= 1, 5000, "typing shown");

    await channel.send({ channel: "discord", chatId: dm.id, content: "Reminder: stretch" }); // no turn
    expect(channel.isTyping(dm.id)).toBe(true);
    const after = typingPosts();
    await fake.waitFor(() => typingPosts() > after, 5000, "typing renewed after the reminder");

    await channel.send({ channel: "discord", chatId: dm.id, content: "the answer", turnId: "t1" });
    channel.onTurn(turn("turnEnd", dm.id, "t1"));
    expect(channel.isTyping(dm.id)).toBe(false);
  });

  it("repeats while the turn runs and stops at its turnEnd; a background turn shows none", async () => {
    const { channel, fake, sink, alice, general } = await setup();
    await channel.start(sink, never());
    const dm = fake.dmChannel(alice);
    const typingPosts = (id: string) => fake.calls("POST", `/channels/${id}/typing`).length;
    channel.onTurn(turn("turnStart", general.id, "cron-1", true));
    channel.onTurn(turn("turnStart", dm.id, "t1"));
    await fake.waitFor(() => typingPosts(dm.id) >= 3, 5000, "three typing signals");
    channel.onTurn(turn("turnEnd", dm.id, "t1"));
    expect(channel.isTyping(dm.id)).toBe(false);
    expect(channel.isTyping(general.id)).toBe(false);
    expect(typingPosts(general.id)).toBe(0);
  });
});

describe("DiscordChannel: receiving", () => {
  it("keeps a chat's messages in order while an attachment downloads", async () => {
    const { channel, fake, sink, inbound, alice } = await setup();
    await channel.start(sink, never());
    const dm = fake.dmChannel(alice);
    const slow = fake.addAttachment("slow.txt", "data", "text/plain", { delayMs: 200 });
    fake.userMessage({ channelId: dm.id, author: alice, content: "first, with a file", attachments: [slow] });
    fake.userMessage({ channelId: dm.id, author: alice, content: "second" });
    await fake.waitFor(() => inbound.length === 2, 5000, "both messages");
    expect(inbound.map((m) => m.content)).toEqual(["first, with a file", "second"]);
    expect(inbound[0]!.media).toHaveLength(1);
  });

  it("journals a message with files (reserves it) before downloading, since Discord never sends it again", async () => {
    const { channel, fake, inbound, alice } = await setup();
    const reserved: InboundMessage[] = [];
    let downloadsAtReserve = -1;
    await channel.start(
      {
        allows: () => true,
        publishInbound: (m) => inbound.push(m),
        refuse: (m) => inbound.push(m),
        reserve: (draft) => {
          reserved.push(draft);
          downloadsAtReserve = fake.requests.filter((r) => r.path.startsWith("/attachments/")).length;
          return { publish: (m) => inbound.push(m), cancel: () => undefined };
        },
      },
      never(),
    );
    const file = fake.addAttachment("photo.png", "png-bytes", "image/png", { delayMs: 100 });
    fake.userMessage({
      channelId: fake.dmChannel(alice).id,
      author: alice,
      content: "look",
      attachments: [file],
    });
    await fake.waitFor(() => inbound.length === 1, 5000, "the message");
    expect(reserved.map((m) => m.content)).toEqual([`look\n${INTERRUPTED_DOWNLOAD_NOTE}`]);
    expect(downloadsAtReserve).toBe(0);
    expect(inbound[0]!.media).toHaveLength(1);
  });

  it("does not download files from senders who are not allowed in, but still hands the message on", async () => {
    const { channel, fake, sink, inbound, alice } = await setup({ discord: { allowFrom: ["someone-else"] } });
    await channel.start(sink, never());
    const file = fake.addAttachment("x.txt", "data", "text/plain");
    fake.userMessage({
      channelId: fake.dmChannel(alice).id,
      author: alice,
      content: "let me in",
      attachments: [file],
    });
    await fake.waitFor(() => inbound.length === 1, 5000, "the message");
    expect(inbound[0]).not.toHaveProperty("media");
    expect(fake.requests.filter((r) => r.path.startsWith("/attachments/"))).toHaveLength(0);
  });

  it("transcribes a voice message through the configured /audio/transcriptions endpoint", async () => {
    const { channel: first, fake, sink, inbound, alice } = await setup();
    await first.stop();
    const config = ConfigSchema.parse({
      providers: { whisper: { apiBase: fake.transcriptionBaseURL, apiKey: "k" } },
      transcription: { provider: "whisper", model: "whisper-large" },
    });
    const voiced = new DiscordChannel({
      config: DiscordConfigSchema.parse({
        enabled: true,
        token: fake.token,
        apiUrl: fake.apiUrl,
        allowFrom: ["*"],
      }),
      workspace: join(dir, "ws"),
      maxMediaBytes: 1024 * 1024,
      transcriber: createTranscriber(config),
    });
    channel = voiced;
    await voiced.start(sink, never());
    fake.voiceMessage({ channelId: fake.dmChannel(alice).id, author: alice });
    await fake.waitFor(() => inbound.length === 1, 5000, "the voice message");
    expect(inbound[0]!.content).toBe(`[voice message, transcribed: ${fake.transcript}]`);
    expect(inbound[0]!.media).toHaveLength(1);
    expect(fake.transcriptions.map((t) => t.fileName)).toEqual([
      expect.stringMatching(/voice-message\.ogg$/),
    ]);
  });

  it("asks the gate before any side effect: no download, no journal entry for a refused sender", async () => {
    const BOB = "900000000000000001";
    const { channel, fake, inbound, alice, allows } = await setup({ discord: { allowFrom: [BOB] } });
    const bob = fake.addUser("bob", { id: BOB });
    const reserved: InboundMessage[] = [];
    await channel.start(
      {
        allows,
        publishInbound: (m) => inbound.push(m),
        refuse: (m) => inbound.push(m),
        reserve: (draft) => {
          reserved.push(draft);
          return { publish: (m) => inbound.push(m), cancel: () => undefined };
        },
      },
      never(),
    );
    fake.userMessage({
      channelId: fake.dmChannel(alice).id,
      author: alice,
      content: "let me in",
      attachments: [fake.addAttachment("x.txt", "data", "text/plain")],
    });
    await fake.waitFor(() => inbound.length === 1, 5000, "the refused message");
    // Handed on bare, with a note for the file: the manager tells alice how to get in.
    expect(inbound[0]).toMatchObject({ senderId: alice.id, content: "let me in" });
    expect(inbound[0]).not.toHaveProperty("media");
    expect(reserved).toEqual([]);
    // bob is let in: his download shows that alice's would have happened by now.
    fake.userMessage({
      channelId: fake.dmChannel(bob).id,
      author: bob,
      content: "hello",
      attachments: [fake.addAttachment("y.txt", "data", "text/plain")],
    });
    await fake.waitFor(() => inbound.length === 2, 5000, "bob's message");
    expect(reserved).toHaveLength(1);
    expect(fake.requests.filter((r) => r.path.startsWith("/attachments/")).map((r) => r.path)).toEqual([
      expect.stringMatching(/\/y\.txt$/),
    ]);
  });
});

describe("DiscordChannel: slash commands", () => {
  it("edits the deferred answer with the first chunk and sends the rest as follow-ups", async () => {
    const { channel, fake, sink, inbound, alice } = await setup();
    await channel.start(sink, never());
    const dm = fake.dmChannel(alice);
    const { id } = fake.slashCommand({ name: "help", user: alice, channelId: dm.id });
    await fake.waitFor(() => inbound.length === 1 && fake.calls("POST", /\/callback$/).length === 1);
    expect(inbound[0]).toMatchObject({ content: "/help", chatId: dm.id, interactionId: id });
    const long = `${"first ".repeat(300)}\n\n${"second ".repeat(200)}`;
    await channel.send({ channel: "discord", chatId: dm.id, content: long, interactionId: id });
    expect(fake.sent.map((m) => m.via)).toEqual(["interaction-original", "followup"]);
    expect(fake.sent[0]!.content.startsWith("first")).toBe(true);
    expect(fake.sent[1]!.content.startsWith("second")).toBe(true);
    // After the final answer the interaction is done: later messages of that chat go to the channel.
    await channel.send({
      channel: "discord",
      chatId: dm.id,
      content: "later",
      interactionId: id,
    });
    expect(fake.sent[2]!.via).toBe("channel");
  });

  it("answers in the channel when the interaction has expired (50027 after 15 minutes), and the send succeeds", async () => {
    const { channel, fake, sink, inbound, alice } = await setup();
    await channel.start(sink, never());
    const dm = fake.dmChannel(alice);
    const { id } = fake.slashCommand({ name: "help", user: alice, channelId: dm.id });
    await fake.waitFor(() => inbound.length === 1 && fake.callbacksOf(id).length === 1);
    fake.advanceClock(fake.interactionTokenMs + 1000);
    await channel.send({ channel: "discord", chatId: dm.id, content: "a late answer", interactionId: id });
    const edit = fake.calls("PATCH", /^\/webhooks\/\d+\/[^/]+\/messages\/@original$/);
    expect(edit.map((r) => [r.status, (r.body as { content?: string }).content])).toEqual([
      [401, "a late answer"],
    ]);
    expect(fake.sent.map((m) => [m.via, m.channelId, m.content])).toEqual([
      ["channel", dm.id, "a late answer"],
    ]);
    // The interaction is forgotten: what follows goes straight to the channel.
    await channel.send({ channel: "discord", chatId: dm.id, content: "and more", interactionId: id });
    expect(fake.sent.map((m) => m.via)).toEqual(["channel", "channel"]);
    expect(fake.calls("PATCH", /^\/webhooks\//)).toHaveLength(1);
    expect(fake.calls("POST", /^\/webhooks\//)).toHaveLength(0);
  });

  it("defers a refused sender's slash command privately at once, and answers it when no notice comes", async () => {
    const BOB = "900000000000000002";
    const { channel, fake, sink, inbound, alice } = await setup({
      discord: { allowFrom: [BOB] },
      // This sink sends no notice (the manager's would): the short answer follows after this.
      adapter: { refusalNoticeWaitMs: 50 },
    });
    const bob = fake.addUser("bob", { id: BOB });
    await channel.start(sink, never());
    const refused = fake.slashCommand({ name: "help", user: alice, channelId: fake.dmChannel(alice).id });
    await fake.waitFor(() => inbound.length === 1, 5000, "the refused command");
    expect(inbound[0]).toMatchObject({ senderId: alice.id, content: "/help" });
    const [deferral] = await fake.waitFor(
      () => fake.callbacksOf(refused.id).length === 1 && fake.callbacksOf(refused.id),
      5000,
      "the deferral",
    );
    // Only alice sees the "thinking…" and what replaces it.
    expect(deferral).toEqual({ type: 5, data: { flags: 64 } });
    const answer = await fake.waitFor(
      () => fake.sent.find((m) => m.interactionId === refused.id),
      5000,
      "the answer",
    );
    expect(answer).toMatchObject({
      via: "interaction-original",
      content: "Sorry, I can't take commands from you here.",
    });
    // bob's command is deferred in public ("thinking…" for everyone) and reaches the agent.
    const allowed = fake.slashCommand({ name: "help", user: bob, channelId: fake.dmChannel(bob).id });
    await fake.waitFor(() => fake.callbacksOf(allowed.id).length === 1, 5000, "bob's deferral");
    expect(fake.callbacksOf(allowed.id)).toEqual([{ type: 5, data: { flags: 0 } }]);
    await fake.waitFor(() => inbound.length === 2, 5000, "bob's command");
  });

  it("refuses a slash command outside the allowlisted channels, privately, without bothering the agent", async () => {
    const { channel, fake, sink, inbound, general, alice } = await setup({
      discord: { groupPolicy: "allowlist", groupAllowFrom: ["1"] },
    });
    await channel.start(sink, never());
    fake.slashCommand({ name: "new", user: alice, channelId: general.id });
    const callback = await fake.waitFor(() => fake.calls("POST", /\/callback$/)[0]);
    expect(callback.body).toMatchObject({ type: 4, data: { flags: 64 } });
    expect((callback.body as { data: { content: string } }).data.content).toMatch(/groupAllowFrom/);
    expect(inbound).toHaveLength(0);
  });
});
