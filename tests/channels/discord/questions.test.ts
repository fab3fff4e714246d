/**
 * Questions with buttons on Discord (real discord.js against FakeDiscord), what the contract suite
 * (tests/channels/contract/questions.test.ts) leaves to the platform: rows of buttons, long texts
 * split with the buttons under the last part, presses in a guild channel, buttons that are not ours,
 * and edits that cannot be done.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MessageBus } from "../../../src/bus/bus.js";
import type { InboundMessage, OutboundMessage, Question } from "../../../src/bus/types.js";
import { DiscordChannel } from "../../../src/channels/discord/adapter.js";
import { DiscordConfigSchema } from "../../../src/config/platforms/discord.js";
import { questionComponents } from "../../../src/channels/discord/questions.js";
import { ChannelManager } from "../../../src/channels/manager.js";
import type { ChoiceClick, ChoiceOutcome, InboundSink } from "../../../src/channels/types.js";
import { ChannelError } from "../../../src/util/errors.js";
import { EPHEMERAL, FakeDiscord, type FakeUser } from "../../fakes/discord-server.js";
import { captureLog } from "../../helpers/log.js";
import { waitFor } from "../../helpers/wait.js";

const APPROVE: Question = {
  id: "q1",
  choices: [
    { id: "approve", label: "Approve", style: "primary" },
    { id: "deny", label: "Deny", style: "danger" },
    { id: "always", label: "Always allow this in this chat" },
  ],
};

let dir: string;
let fake: FakeDiscord;
let channel: DiscordChannel;
let alice: FakeUser;
let clicks: ChoiceClick[];
let outcome: ChoiceOutcome;
let sink: InboundSink;
let inbound: InboundMessage[];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-discord-questions-"));
  fake = await FakeDiscord.start();
  alice = fake.addUser("alice");
  clicks = [];
  inbound = [];
  outcome = { accepted: true, notice: "Approved." };
  sink = {
    allows: () => true,
    publishInbound: (msg) => inbound.push(msg),
    refuse: () => undefined,
    choose: (click) => {
      clicks.push(click);
      return outcome;
    },
  };
  channel = new DiscordChannel({
    config: DiscordConfigSchema.parse({ enabled: true, token: fake.token, apiUrl: fake.apiUrl }),
    workspace: join(dir, "ws"),
    maxMediaBytes: 1024 * 1024,
    connectTimeoutMs: 60_000, // only ends a hung test
    log: captureLog().log,
  });
});

afterEach(async () => {
  await channel.stop();
  await fake.close();
  await rm(dir, { recursive: true, force: true });
});

function question(chatId: string, content: string, q: Question = APPROVE): OutboundMessage {
  return { channel: "discord", chatId, kind: "question", content, question: q };
}

function edit(
  chatId: string,
  content: string,
  target: { questionId: string; ref?: string },
): OutboundMessage {
  return { channel: "discord", chatId, kind: "edit", content, edit: target };
}

/** Presses and waits until the adapter answered; returns the callback body. */
async function press(user: FakeUser, messageId: string, label: string) {
  const { id } = fake.pressButton({ user, messageId, label });
  const [answer] = await fake.waitFor(() => {
    const callbacks = fake.callbacksOf(id);
    return callbacks.length > 0 && callbacks;
  });
  return answer as { type: number; data?: { content?: string; flags?: number } };
}

describe("questionComponents", () => {
  it("puts at most 5 buttons in a row, styles them, and cuts long labels to Discord's 80", () => {
    const built = questionComponents({
      id: "q9",
      choices: Array.from({ length: 7 }, (_, i) => ({
        id: `c${i}`,
        label: i === 6 ? "x".repeat(100) : `Choice ${i}`,
        ...(i === 0 ? { style: "primary" as const } : i === 1 ? { style: "danger" as const } : {}),
      })),
    });
    // What goes on the wire: discord.js's builders as JSON.
    const rows = built.map((row) => row.toJSON());
    const buttons = rows.map((row) =>
      row.components.map((b) => b as { style: number; label: string; custom_id: string }),
    );
    expect(buttons.map((r) => r.length)).toEqual([5, 2]);
    expect(buttons[0]!.slice(0, 3).map((b) => b.style)).toEqual([1, 4, 2]);
    expect(buttons[0]![0]!.custom_id).toBe("q:q9:c0");
    expect(buttons[1]![1]!.label).toHaveLength(80);
  });
});

describe("questions on Discord", () => {
  it("splits a long question like a reply, with the buttons under the last part, whose id is the ref", async () => {
    await channel.start(sink, new AbortController().signal);
    const dm = fake.dmChannel(alice).id;
    const text = Array.from({ length: 90 }, (_, i) => `Line ${i}: ${"word ".repeat(8)}`).join("\n");
    const sent = await channel.send(question(dm, text));
    const posted = fake.botMessages();
    expect(posted.length).toBeGreaterThan(1);
    for (const m of posted) expect(m.content.length).toBeLessThanOrEqual(2000);
    expect(posted.slice(0, -1).every((m) => !m.components?.length)).toBe(true);
    expect(fake.buttonsOf(posted.at(-1)!.id)).toEqual(["Approve", "Deny", "Always allow this in this chat"]);
    expect(sent).toEqual({ ref: posted.at(-1)!.id });
  });

  it("a press in a guild channel names that channel, the presser and the guild", async () => {
    const guild = fake.addGuild({ name: "home", channels: ["general"] });
    const general = guild.channels[0]!.id;
    await channel.start(sink, new AbortController().signal);
    const { ref } = (await channel.send(question(general, "Run `ls`?")))!;
    outcome = { accepted: false, notice: "Only the person who asked can answer." };
    const answer = await press(alice, ref, "Deny");
    expect(answer).toMatchObject({
      type: 4,
      data: { flags: EPHEMERAL, content: "Only the person who asked can answer." },
    });
    expect(clicks).toHaveLength(1);
    expect(clicks[0]).toMatchObject({
      channel: "discord",
      chatId: general,
      senderId: alice.id,
      senderAliases: ["alice"],
      questionId: "q1",
      choiceId: "deny",
      metadata: { guildId: guild.id, channelId: general },
    });
    // The notice is the presser's alone: the channel still shows the question and its buttons.
    expect(fake.botMessages().map((m) => m.content)).toEqual(["Run `ls`?"]);
    expect(inbound).toEqual([]); // a press is not a message for the agent
  });

  it("acknowledges a button that is not ours without a word and without asking the desk", async () => {
    await channel.start(sink, new AbortController().signal);
    const dm = fake.dmChannel(alice).id;
    const old = fake.botMessage({
      channelId: dm,
      content: "An old prompt",
      components: [{ type: 1, components: [{ type: 2, style: 1, label: "Yes", custom_id: "approve:42" }] }],
    });
    const answer = await press(alice, old.id, "Yes");
    expect(answer).toEqual({ type: 6 }); // DEFERRED_UPDATE_MESSAGE: nothing shown, no "interaction failed"
    expect(clicks).toEqual([]);
  });

  it("without a question desk the presser is told it can't be answered here", async () => {
    await channel.start(
      { allows: () => true, publishInbound: () => undefined, refuse: () => undefined },
      new AbortController().signal,
    );
    const { ref } = (await channel.send(question(fake.dmChannel(alice).id, "Run `ls`?")))!;
    const answer = await press(alice, ref, "Approve");
    expect(answer.data?.content).toMatch(/can't be answered here/);
  });

  it("an edit with the text the message already has still succeeds and takes the buttons away", async () => {
    await channel.start(sink, new AbortController().signal);
    const dm = fake.dmChannel(alice).id;
    const { ref } = (await channel.send(question(dm, "Run `ls`?")))!;
    await channel.send(edit(dm, "Run `ls`?", { questionId: "q1" }));
    expect(fake.message(ref)).toMatchObject({ content: "Run `ls`?", components: [] });
    expect(fake.botMessages()).toHaveLength(1);
  });

  it("an edit of a question nobody remembers, without a ref, is posted as a new message", async () => {
    await channel.start(sink, new AbortController().signal);
    const dm = fake.dmChannel(alice).id;
    await channel.send(edit(dm, "Expired (palaver restarted)", { questionId: "gone1" }));
    expect(fake.botMessages().map((m) => m.content)).toEqual(["Expired (palaver restarted)"]);
    expect(fake.calls("PATCH", /^\/channels\//)).toEqual([]);
  });

  it("an edit of a deleted question, or of somebody else's message, fails for good", async () => {
    await channel.start(sink, new AbortController().signal);
    const dm = fake.dmChannel(alice).id;
    const { ref } = (await channel.send(question(dm, "Run `ls`?")))!;
    fake.deleteMessage(ref);
    await expect(channel.send(edit(dm, "Approved", { questionId: "q1" }))).rejects.toMatchObject({
      permanent: true,
      code: 10008,
      method: "editMessage",
    });
    const theirs = fake.userMessage({ channelId: dm, author: alice, content: "hi" });
    const failure = await channel
      .send(edit(dm, "Approved", { questionId: "x", ref: theirs.id }))
      .catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(ChannelError);
    expect(failure).toMatchObject({ permanent: true, code: 50005 });
  });

  it("the manager does not retry an edit of a deleted question, and the chat's next reply goes out", async () => {
    const bus = new MessageBus();
    const { log, lines } = captureLog();
    const manager = new ChannelManager({
      bus,
      sendProgress: false,
      sendToolHints: false,
      log,
      outboxRetryBaseMs: 20,
    });
    manager.add(channel, { allowFrom: ["*"] });
    await manager.start();
    try {
      await waitFor(() => manager.status()[0]?.state === "running", undefined, "running");
      const dm = fake.dmChannel(alice).id;
      const { ref } = (await channel.send(question(dm, "Run `ls`?")))!;
      fake.deleteMessage(ref);
      bus.publishOutbound(edit(dm, "Approved", { questionId: "q1" }));
      bus.publishOutbound({ channel: "discord", chatId: dm, content: "Done." } satisfies OutboundMessage);
      await waitFor(() => fake.botMessages().some((m) => m.content === "Done."), undefined, "the next reply");
      expect(fake.calls("PATCH", /^\/channels\//)).toHaveLength(1);
      expect(lines.some((l) => l.code === 10008 && l.kind === "edit")).toBe(true);
    } finally {
      await manager.stop(1000);
    }
  });

  it("a question without text still carries its buttons, with the choices as its text", async () => {
    await channel.start(sink, new AbortController().signal);
    const { ref } = (await channel.send(question(fake.dmChannel(alice).id, "  ")))!;
    expect(fake.message(ref)?.content).toBe('Reply "Approve", "Deny", "Always allow this in this chat".');
    expect(fake.buttonsOf(ref)).toHaveLength(3);
  });
});
