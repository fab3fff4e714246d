/**
 * Streamed replies on Discord (real DiscordChannel, real discord.js, real ChannelManager against
 * FakeDiscord): what the contract suite does not cover. Edits that Discord rate-limits are waited
 * out by the live preview and coalesced into one edit with the newest text (never a stale edit sent
 * late), the final edit is never dropped, a rate limit longer than the preview waits leaves the
 * final to one new message, "typing…" stops at the first text, and a reply in a thread stays there,
 * quoting the message it answers on its first part only.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MessageBus } from "../../../src/bus/bus.js";
import type { InboundMessage, OutboundMessage, TurnEvent } from "../../../src/bus/types.js";
import { replyPlaceOf } from "../../../src/bus/types.js";
import { DiscordChannel } from "../../../src/channels/discord/adapter.js";
import { DiscordConfigSchema } from "../../../src/config/platforms/discord.js";
import { discordChunks } from "../../../src/channels/discord/format.js";
import { editedMessageId } from "../../../src/channels/discord/preview.js";
import { ChannelManager } from "../../../src/channels/manager.js";
import { FakeDiscord, type FakeChannel, type FakeUser } from "../../fakes/discord-server.js";
import { captureLog } from "../../helpers/log.js";
import { waitFor } from "../../helpers/wait.js";

const EDIT = /^\/channels\/\d+\/messages\/\d+$/;

let dir: string;
let fake: FakeDiscord;
let channel: DiscordChannel;
let manager: ChannelManager | undefined;
let bus: MessageBus;
let alice: FakeUser;
let general: FakeChannel;
let inbound: InboundMessage[];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-discord-streaming-"));
  fake = await FakeDiscord.start();
  general = fake.addGuild({ name: "home", channels: ["general"] }).channels[0]!;
  alice = fake.addUser("alice");
  bus = new MessageBus();
  inbound = [];
  bus.onInbound((m) => inbound.push(m));
});

afterEach(async () => {
  await manager?.stop(1000);
  manager = undefined;
  await fake.close();
  await rm(dir, { recursive: true, force: true });
});

/** The channel under a streaming manager (every delta shown at once unless `intervalMs`). */
async function start(opts: { replyToMessage?: boolean; intervalMs?: number } = {}): Promise<void> {
  channel = new DiscordChannel({
    config: DiscordConfigSchema.parse({
      enabled: true,
      token: fake.token,
      apiUrl: fake.apiUrl,
      allowFrom: ["*"],
      replyToMessage: opts.replyToMessage ?? false,
    }),
    workspace: join(dir, "ws"),
    maxMediaBytes: 1024 * 1024,
    typingIntervalMs: 30,
    log: captureLog().log,
  });
  manager = new ChannelManager({
    bus,
    sendProgress: true,
    sendToolHints: false,
    streaming: true,
    streamIntervalMs: opts.intervalMs ?? 0,
    log: captureLog().log,
    outboxRetryBaseMs: 20,
  });
  manager.add(channel, { allowFrom: ["*"] });
  await manager.start();
  await waitFor(() => manager!.status()[0]?.state === "running", undefined, "discord running");
}

/** Alice writes (in `channelId`, a DM by default); resolves with the message on the bus. */
async function aliceSays(text: string, channelId = fake.dmChannel(alice).id): Promise<InboundMessage> {
  const before = inbound.length;
  const inGuild = channelId !== fake.dmChannel(alice).id;
  fake.userMessage({
    channelId,
    author: alice,
    content: inGuild ? `<@${fake.bot.id}> ${text}` : text,
    mentions: inGuild ? [fake.bot] : [],
  });
  await waitFor(() => inbound.length > before, undefined, "the message on the bus");
  return inbound.at(-1)!;
}

function out(msg: InboundMessage, kind: OutboundMessage["kind"], content: string, turnId: string) {
  const replyTo = msg.messageId;
  bus.publishOutbound({
    channel: "discord",
    chatId: msg.chatId,
    kind,
    content,
    turnId,
    ...(typeof replyTo === "string" ? { replyTo } : {}),
    ...replyPlaceOf(msg),
    ...(msg.metadata ? { metadata: msg.metadata } : {}),
  });
}

function turn(msg: InboundMessage, kind: TurnEvent["kind"], turnId: string): void {
  bus.publishTurn({
    kind,
    turnId,
    channel: "discord",
    chatId: msg.chatId,
    ...replyPlaceOf(msg),
    ...(msg.metadata ? { metadata: msg.metadata } : {}),
    ...(kind === "turnEnd" ? { outcome: "done" as const } : {}),
  });
}

const shownTexts = () => fake.shown.map((s) => s.content);
const edits429 = () =>
  fake.requests.filter((r) => r.method === "PATCH" && EDIT.test(r.path) && r.status === 429);

async function finish(msg: InboundMessage, turnId: string, content: string): Promise<void> {
  out(msg, "final", content, turnId);
  turn(msg, "turnEnd", turnId);
  await manager!.flush(30_000);
}

describe("Discord streamed replies", () => {
  it("an edit Discord rate-limits is waited out and sent once with the newest text; the final edit is never dropped", async () => {
    await start();
    const msg = await aliceSays("count");
    // Edits of one message closer than 3 s are 429s: the edit right after the first post meets it.
    fake.editMinIntervalMs = 3000;
    turn(msg, "turnStart", "t1");
    out(msg, "delta", "Counting: 0", "t1");
    await waitFor(() => shownTexts().includes("Counting: 0"), undefined, "the first preview");
    const [preview] = fake.shown;
    out(msg, "delta", "Counting: 0 1", "t1");
    await waitFor(() => edits429().length === 1, undefined, "the refused edit");
    expect(edits429()[0]!.body).toMatchObject({ content: "Counting: 0 1" });
    // While the preview waits (3 s), the model goes on writing.
    let text = "Counting: 0 1";
    for (let i = 2; i <= 20; i++) out(msg, "delta", (text += ` ${i}`), "t1");
    await waitFor(() => shownTexts().includes(text), undefined, "the coalesced edit");
    expect(edits429().length).toBe(1);
    // One edit with the newest text: the refused one was not sent again later, nor any in between.
    expect(fake.shown.filter((s) => s.edit).map((s) => s.content)).toEqual([text]);

    // The final edit meets a rate limit too: waited out, not dropped, not sent twice.
    fake.editMinIntervalMs = 0;
    fake.rateLimitNext({ method: "PATCH", path: EDIT, retryAfter: 0.3 });
    const final = `${text}, **done**.`;
    await finish(msg, "t1", final);
    await waitFor(() => fake.message(preview!.messageId)?.content === final, undefined, "the final in place");
    expect(edits429().length).toBe(2);
    expect(fake.botMessages().map((m) => m.content)).toEqual([final]);
    // Both waits lasted their retry_after: an edit sent sooner would have met another 429.
    expect(fake.earlyRetries).toEqual([]);
  });

  it("an edit rate-limited for longer than the preview waits: the final goes once as a new message", async () => {
    await start();
    const msg = await aliceSays("hi");
    turn(msg, "turnStart", "t1");
    out(msg, "delta", "Hello", "t1");
    await waitFor(() => shownTexts().includes("Hello"), undefined, "the preview");
    // A minute: discord.js must not sit on it (the preview would hang), the preview gives up.
    fake.rateLimitNext({ method: "PATCH", path: EDIT, retryAfter: 60 });
    out(msg, "delta", "Hello there", "t1");
    await waitFor(() => edits429().length === 1, undefined, "the rate-limited edit");
    await finish(msg, "t1", "Hello there, Alice.");
    await waitFor(() => fake.botMessages().length === 2, undefined, "the final as a new message");
    expect(fake.botMessages().map((m) => m.content)).toEqual(["Hello", "Hello there, Alice."]);
  });

  it('"typing…" runs until the first text of the turn shows, then stops for that turn', async () => {
    await start();
    const msg = await aliceSays("hi");
    const typingCalls = () => fake.requests.filter((r) => r.method === "POST" && r.path.endsWith("/typing"));
    turn(msg, "turnStart", "t1");
    await waitFor(() => typingCalls().length >= 2, undefined, "typing repeated");
    expect(channel.isTyping(msg.chatId)).toBe(true);
    out(msg, "delta", "Hello", "t1");
    await waitFor(() => shownTexts().includes("Hello"), undefined, "the preview");
    expect(channel.isTyping(msg.chatId)).toBe(false);
    const postedAt = fake.shown[0]!.at;
    out(msg, "delta", "Hello there", "t1");
    await waitFor(() => shownTexts().includes("Hello there"), undefined, "the next preview");
    await finish(msg, "t1", "Hello there.");
    // No typing signal landed after the preview (it would show "typing…" under it).
    expect(typingCalls().filter((r) => r.at > postedAt)).toEqual([]);
  });

  it("in a thread the reply streams and ends there, quoting the question on its first part only", async () => {
    await start({ replyToMessage: true });
    const thread = fake.createThread({ parentId: general.id, name: "planning", owner: alice });
    const msg = await aliceSays("plan it", thread.id);
    expect(msg.chatId).toBe(thread.id);
    const body = "step ".repeat(600).trim(); // 3000 characters: two messages
    const final = `#### Plan\n\n${body}`;
    turn(msg, "turnStart", "t1");
    out(msg, "delta", "#### Plan", "t1");
    await waitFor(() => shownTexts().includes("#### Plan"), undefined, "the preview");
    out(msg, "delta", `#### Plan\n\n${body}`, "t1");
    await waitFor(() => fake.botMessages().length === 2, undefined, "the continuation");
    await finish(msg, "t1", final);
    const messages = fake.botMessages();
    expect(messages.every((m) => m.channel_id === thread.id)).toBe(true);
    expect(messages.map((m) => m.content)).toEqual(discordChunks(final)); // "#### Plan" became "**Plan**"
    expect(messages[0]!.content.startsWith("**Plan**")).toBe(true);
    expect(messages.map((m) => m.message_reference?.message_id)).toEqual([msg.messageId, undefined]);
  });

  it("a slash command's turn is not streamed; a message's is, at Discord's pace", async () => {
    await start();
    const target = { chatId: fake.dmChannel(alice).id, turnId: "t1" };
    expect(channel.previewSurface({ ...target, interactionId: "42" })).toBeUndefined();
    const surface = channel.previewSurface({ ...target, replyTo: "7" });
    expect(surface).toMatchObject({ maxChars: 2000, intervalMs: 1500 });
  });
});

describe("editedMessageId", () => {
  it("names the message of an edit, and nothing for other calls", () => {
    const api = "http://127.0.0.1:1/api/v10"; // never fetched: only its path is read
    expect(editedMessageId({ method: "PATCH", url: `${api}/channels/1/messages/22` })).toBe("22");
    expect(editedMessageId({ method: "patch", url: `${api}/channels/1/messages/22?x=1` })).toBe("22");
    expect(editedMessageId({ method: "POST", url: `${api}/channels/1/messages` })).toBeUndefined();
    expect(editedMessageId({ method: "DELETE", url: `${api}/channels/1/messages/22` })).toBeUndefined();
    expect(
      editedMessageId({ method: "PATCH", url: `${api}/webhooks/1/tok/messages/@original` }),
    ).toBeUndefined();
  });
});
