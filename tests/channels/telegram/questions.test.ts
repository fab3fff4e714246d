/**
 * Questions with buttons on Telegram, real grammy against the loopback fake: the inline keyboard,
 * callback queries (always answered, data not ours ignored), and edits with Telegram's own errors.
 * The contract suite (tests/channels/contract/questions.test.ts) covers what every platform shares.
 */
import { afterEach, describe, expect, it } from "vitest";
import { MessageBus } from "../../../src/bus/bus.js";
import type { OutboundMessage, Question } from "../../../src/bus/types.js";
import { isAllowed } from "../../../src/channels/access.js";
import { ChannelManager } from "../../../src/channels/manager.js";
import { callbackNotice, inlineKeyboard } from "../../../src/channels/telegram/questions.js";
import type { ChoiceClick, ChoiceOutcome, InboundSink, SentMessage } from "../../../src/channels/types.js";
import { ChannelError } from "../../../src/util/errors.js";
import { visibleText } from "../../fakes/telegram-server.js";
import { captureLog } from "../../helpers/log.js";
import { waitFor } from "../../helpers/wait.js";
import { rig, type Rig } from "./helpers.js";

const FORUM = -1005678;
const APPROVAL: Question = {
  id: "q1",
  choices: [
    { id: "approve", label: "Approve", style: "primary" },
    { id: "deny", label: "Deny", style: "danger" },
  ],
};

let r: Rig | undefined;
let manager: ChannelManager | undefined;
afterEach(async () => {
  await manager?.stop(1000);
  manager = undefined;
  await r?.cleanup();
  r = undefined;
});

/** A started channel whose sink records presses and answers them with `answer`. */
async function started(answer?: (click: ChoiceClick) => ChoiceOutcome, config?: Record<string, unknown>) {
  r = await rig(config ? { config } : {});
  const clicks: ChoiceClick[] = [];
  const sink: InboundSink = {
    allows: (m) => isAllowed(m, ["42"]),
    publishInbound: () => undefined,
    refuse: () => undefined,
    ...(answer ? { choose: (click: ChoiceClick) => (clicks.push(click), answer(click)) } : {}),
  };
  await r.channel.start(sink, new AbortController().signal);
  return { fake: r.fake, channel: r.channel, clicks };
}

function question(content: string, extra: Partial<OutboundMessage> = {}): OutboundMessage {
  return { channel: "telegram", chatId: "42", kind: "question", content, question: APPROVAL, ...extra };
}

function edit(content: string, questionId: string, ref?: string): OutboundMessage {
  return {
    channel: "telegram",
    chatId: "42",
    kind: "edit",
    content,
    edit: { questionId, ...(ref ? { ref } : {}) },
  };
}

async function ask(msg: OutboundMessage): Promise<number> {
  const sent = (await r!.channel.send(msg)) as SentMessage;
  return Number(sent.ref);
}

/** Presses a button by its data and resolves with the answer the presser saw. */
async function press(messageId: number, data: string, from = { id: 42, username: "ada" }) {
  const queryId = r!.fake.pressButton(from, messageId, data);
  return r!.fake.waitFor(() => r!.fake.callbackAnswers.find((a) => a.queryId === queryId));
}

describe("asking", () => {
  it("asks Telegram for callback queries, when polling and with a webhook", async () => {
    const { fake } = await started();
    const poll = await fake.waitForCall("getUpdates", (c) => c.params.allowed_updates !== undefined);
    expect(poll.params.allowed_updates).toEqual(["message", "callback_query", "my_chat_member"]);
    await r!.cleanup();
    r = await rig({ config: { mode: "webhook", webhook: { url: "https://palaver.test/hook", port: 0 } } });
    await r.start();
    expect(r.fake.webhook?.allowed_updates).toEqual(["message", "callback_query", "my_chat_member"]);
  });

  it("puts the buttons under the formatted text, with our data and styles, and returns the message id", async () => {
    const { fake } = await started();
    const ref = await ask(question("Run `rm -rf build`?"));
    const sent = fake.sent.at(-1)!;
    expect(sent.messageId).toBe(ref);
    expect(sent.parseMode).toBe("HTML");
    expect(sent.text).toBe("Run <code>rm -rf build</code>?");
    expect(sent.buttons).toEqual([
      [
        { text: "Approve", callback_data: "q:q1:approve", style: "primary" },
        { text: "Deny", callback_data: "q:q1:deny", style: "danger" },
      ],
    ]);
  });

  it("gives each long label a row of its own", () => {
    const keyboard = inlineKeyboard({
      id: "q2",
      choices: [...APPROVAL.choices, { id: "always", label: "Always allow this in this chat" }],
    });
    expect(keyboard.inline_keyboard.map((row) => row.map((b) => b.text))).toEqual([
      ["Approve"],
      ["Deny"],
      ["Always allow this in this chat"],
    ]);
  });

  it("splits a long question and hangs the buttons under its last part", async () => {
    const { fake } = await started(undefined, { replyToMessage: true });
    const long = Array.from({ length: 300 }, (_, i) => `line ${i}: ${"x".repeat(30)}`).join("\n");
    const ref = await ask(question(long, { replyTo: "9" }));
    const parts = fake.sent;
    expect(parts.length).toBeGreaterThan(1);
    expect(parts.at(-1)!.messageId).toBe(ref);
    expect(parts.slice(0, -1).every((m) => m.buttons.length === 0)).toBe(true);
    expect(
      parts
        .at(-1)!
        .buttons.flat()
        .map((b) => b.text),
    ).toEqual(["Approve", "Deny"]);
    expect(parts.map((m) => m.replyTo)).toEqual([9, ...parts.slice(1).map(() => undefined)]);
  });

  it("refuses a question without choices as a permanent failure", async () => {
    const { channel } = await started();
    await expect(
      channel.send(question("Sure?", { question: { id: "q3", choices: [] } })),
    ).rejects.toMatchObject({
      permanent: true,
    });
  });
});

describe("presses", () => {
  it("hands who pressed what to the sink, with the topic, and shows its notice", async () => {
    const { fake, clicks } = await started(() => ({ accepted: true, notice: "Approved." }));
    const ref = await ask(question("Go?", { chatId: String(FORUM), threadId: "55" }));
    expect(fake.sent.at(-1)!.threadId).toBe(55);
    expect(await press(ref, "q:q1:approve")).toEqual(expect.objectContaining({ text: "Approved." }));
    expect(clicks).toEqual([
      {
        channel: "telegram",
        chatId: String(FORUM),
        senderId: "42",
        senderAliases: ["@ada"],
        questionId: "q1",
        choiceId: "approve",
        threadId: "55",
        metadata: { chatType: "supergroup", isGroup: true },
      },
    ]);
  });

  it("answers, silently, a press whose data is not ours, and never asks the sink", async () => {
    const { clicks } = await started(() => ({ accepted: true, notice: "Approved." }));
    const ref = await ask(question("Go?"));
    for (const data of ["settings:open", "q:Q1:approve", "q:q1:approve:extra"]) {
      expect((await press(ref, data)).text).toBeUndefined();
    }
    expect(clicks).toEqual([]);
  });

  it("answers every press even when nobody can take it or the sink throws", async () => {
    let { fake } = await started();
    let ref = await ask(question("Go?"));
    expect((await press(ref, "q:q1:approve")).text).toBe("This can't be answered here.");
    await r!.cleanup();
    ({ fake } = await started(() => {
      throw new Error("desk broke");
    }));
    ref = await ask(question("Go?"));
    expect((await press(ref, "q:q1:deny")).text).toMatch(/went wrong/);
    expect(fake.callsTo("answerCallbackQuery")).toHaveLength(1);
  });

  it("cuts a notice to the 200 characters Telegram shows", async () => {
    await started(() => ({ accepted: false, notice: "No. ".repeat(100) }));
    const ref = await ask(question("Go?"));
    const shown = (await press(ref, "q:q1:approve")).text!;
    expect(shown).toHaveLength(200);
    expect(shown.endsWith("…")).toBe(true);
    expect(callbackNotice("🙂".repeat(150))).toBe(`${"🙂".repeat(99)}…`);
  });
});

describe("edits", () => {
  it("rewrites the remembered question without buttons, formatted; the same edit again is no failure", async () => {
    const { fake, channel } = await started();
    const ref = await ask(question("Run `rm -rf build`?"));
    await channel.send(edit("**Approved** by @ada", "q1"));
    const call = fake.callsTo("editMessageText").at(-1)!.params;
    expect(call).toMatchObject({
      chat_id: 42,
      message_id: ref,
      parse_mode: "HTML",
      reply_markup: { inline_keyboard: [] },
    });
    expect(fake.sent).toHaveLength(1);
    expect(visibleText(fake.sent[0]!)).toBe("Approved by @ada");
    expect(fake.sent[0]!.buttons).toEqual([]);
    // Telegram answers "message is not modified": the message already says it.
    await channel.send(edit("**Approved** by @ada", "q1", String(ref)));
    expect(fake.callsTo("editMessageText")).toHaveLength(2);
    expect(fake.sent).toHaveLength(1);
  });

  it("an edit too long for one message rewrites the question with its start and sends the rest", async () => {
    const { fake, channel } = await started();
    const ref = await ask(question("Go?"));
    const long = Array.from({ length: 300 }, (_, i) => `line ${i}: ${"y".repeat(30)}`).join("\n");
    await channel.send(edit(long, "q1"));
    expect(fake.sent[0]!.messageId).toBe(ref);
    expect(visibleText(fake.sent[0]!)).toMatch(/^line 0: y+\nline 1:/);
    expect(fake.sent.length).toBeGreaterThan(1);
    expect(fake.sent.every((m) => m.buttons.length === 0)).toBe(true);
    expect(visibleText(fake.sent.at(-1)!)).toMatch(/line 299: y+$/);
  });

  it("a question it knows nothing about is told in a new message", async () => {
    const { fake, channel } = await started();
    await channel.send(edit("Expired (palaver restarted)", "gone1"));
    expect(fake.callsTo("editMessageText")).toHaveLength(0);
    expect(fake.sent.map(visibleText)).toEqual(["Expired (palaver restarted)"]);
  });

  it("a deleted or frozen message is a permanent failure", async () => {
    const { fake, channel } = await started();
    const deleted = await ask(question("Go?"));
    fake.userDeletes(deleted);
    const err = await channel.send(edit("Approved", "q1")).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ChannelError);
    expect(err).toMatchObject({ permanent: true, method: "editMessageText", code: 400 });
    expect((err as Error).message).toMatch(/message to edit not found/);

    const frozen = await ask(question("Go?"));
    fake.freezeMessage(frozen);
    await expect(channel.send(edit("Approved", "q1", String(frozen)))).rejects.toMatchObject({
      permanent: true,
      message: expect.stringMatching(/can't be edited/) as unknown,
    });
  });

  it("through the manager, a failed edit is tried once and the chat's next message still goes out", async () => {
    r = await rig();
    const bus = new MessageBus();
    manager = new ChannelManager({
      bus,
      sendProgress: false,
      sendToolHints: false,
      log: captureLog().log,
      outboxRetryBaseMs: 20,
    });
    manager.add(r.channel, { allowFrom: ["42"] });
    await manager.start();
    await waitFor(() => manager!.status()[0]?.state === "running", undefined, "telegram running");
    bus.publishOutbound(question("Go?"));
    const asked = await r.fake.waitForSent((m) => m.buttons.length > 0);
    r.fake.userDeletes(asked.messageId);
    bus.publishOutbound(edit("Approved", "q1"));
    bus.publishOutbound({ channel: "telegram", chatId: "42", content: "next" });
    await r.fake.waitForSent((m) => m.text === "next");
    expect(r.fake.callsTo("editMessageText")).toHaveLength(1);
  });
});
