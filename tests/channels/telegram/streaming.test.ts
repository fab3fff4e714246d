/**
 * Streamed replies on Telegram, the platform's own rules: drafts (sendMessageDraft) in private
 * chats and one sendMessage for the final; an edited message in groups and topics, finalized in
 * place; a server or chat without drafts falls back to edits (remembered); Telegram's 429 on edits
 * that come too fast is waited out with the backlog coalesced, and the final edit is never dropped;
 * continuation past 4096 characters; "typing…" ends at the first text. The real adapter and grammy
 * against FakeTelegram, driven by the real LivePreview.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { TurnEvent } from "../../../src/bus/types.js";
import { LivePreview, STOPPED_MARK } from "../../../src/channels/live-preview.js";
import { formatForTelegram } from "../../../src/channels/telegram/format.js";
import { isPrivateChat } from "../../../src/channels/telegram/preview.js";
import type { PreviewTarget } from "../../../src/channels/types.js";
import { visibleText } from "../../fakes/telegram-server.js";
import { captureLog } from "../../helpers/log.js";
import { waitFor } from "../../helpers/wait.js";
import { rig, type Rig } from "./helpers.js";

const PRIVATE: PreviewTarget = {
  chatId: "42",
  turnId: "t1",
  replyTo: "5",
  metadata: { chatType: "private", isGroup: false },
};
const TOPIC: PreviewTarget = {
  chatId: "-100123",
  turnId: "t1",
  replyTo: "9",
  threadId: "7",
  metadata: { chatType: "supergroup", isGroup: true },
};
const ANSWER = "The answer is **42**, as everyone knows.";
const ANSWER_HTML = formatForTelegram(ANSWER)[0]!.html;

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

function previewIn(target: PreviewTarget, intervalMs = 0): LivePreview {
  const surface = r!.channel.previewSurface(target);
  if (!surface) throw new Error("no preview surface");
  return new LivePreview(surface, { intervalMs });
}

/** Streams `texts` (each the whole text so far), waiting for each to show. */
async function grow(preview: LivePreview, texts: string[]): Promise<void> {
  for (const text of texts) {
    preview.update(text);
    await waitFor(() => r!.fake.shown.includes(text), undefined, `"${text}" shown`);
  }
}

describe("Telegram streamed replies", () => {
  it("private chat: drafts while writing, then the formatted final as one new message", async () => {
    const { fake } = await started();
    const preview = previewIn(PRIVATE);
    await grow(preview, ["The answer", "The answer is **42**"]);
    expect(await preview.finish(ANSWER)).toBe(true);

    expect(fake.drafts.map((d) => d.text)).toEqual(["The answer", "The answer is **42**"]);
    // One draft, updated: the same id, plain text (never a parse error mid-stream).
    expect(new Set(fake.drafts.map((d) => d.draftId)).size).toBe(1);
    expect(fake.drafts.every((d) => d.parseMode === undefined && d.chatId === 42)).toBe(true);
    expect(fake.sent).toHaveLength(1);
    expect(fake.sent[0]).toMatchObject({ text: ANSWER_HTML, parseMode: "HTML" });
    expect(fake.callsTo("editMessageText")).toHaveLength(0);
  });

  it("private chat: /stop sends the text shown so far, marked, since a draft would vanish", async () => {
    const { fake } = await started();
    const preview = previewIn(PRIVATE);
    await grow(preview, ["Once upon", "Once upon a time"]);
    await preview.stop();
    expect(fake.sent.map(visibleText)).toEqual([`Once upon a time${STOPPED_MARK}`]);
    expect(fake.sent[0]!.parseMode).toBeUndefined();
  });

  it("private chat: past 4096 characters the frozen part is kept as a message and the rest continues", async () => {
    const { fake } = await started();
    const long = "streaming ".repeat(620).trim(); // 6199 characters
    const preview = previewIn(PRIVATE);
    preview.update(long.slice(0, 3000));
    await waitFor(() => fake.drafts.length === 1, undefined, "the first draft");
    preview.update(long);
    const ids = () => [...new Set(fake.drafts.map((d) => d.draftId))];
    await waitFor(() => ids().length === 2, undefined, "the second part's draft");
    // The first part left its draft for a message before the second draft started.
    const [firstId, secondId] = ids();
    const frozen = fake.drafts.filter((d) => d.draftId === firstId).at(-1)!;
    expect(fake.sent.map((m) => m.text)).toEqual([frozen.text]);
    expect(frozen.text.length).toBeLessThanOrEqual(4096);
    const sends = fake.calls.filter((c) => c.method === "sendMessage" || c.method === "sendMessageDraft");
    expect(sends.findIndex((c) => c.method === "sendMessage")).toBeLessThan(
      sends.findIndex((c) => c.params.draft_id === secondId),
    );

    expect(await preview.finish(long)).toBe(true);
    const parts = formatForTelegram(long);
    expect(parts).toHaveLength(2);
    // The kept part is rewritten in place, the draft becomes the second message.
    expect(fake.sent.map((m) => m.text)).toEqual(parts.map((p) => p.html));
    expect(fake.callsTo("editMessageText")).toHaveLength(1);
    expect(fake.sent.map(visibleText).join(" ")).toBe(long);
  });

  it("a topic: one message in the topic, edited, finalized in place with HTML; no drafts", async () => {
    const { fake } = await started({ config: { replyToMessage: true } });
    const preview = previewIn(TOPIC);
    await grow(preview, ["The answer", "The answer is **42**"]);
    expect(await preview.finish(ANSWER)).toBe(true);

    expect(fake.callsTo("sendMessageDraft")).toHaveLength(0);
    expect(fake.sent).toHaveLength(1);
    expect(fake.sent[0]).toMatchObject({
      chatId: -100123,
      threadId: 7,
      replyTo: 9,
      text: ANSWER_HTML,
      parseMode: "HTML",
      edits: 2,
    });
    expect(fake.shown).toEqual(["The answer", "The answer is **42**", visibleText(fake.sent[0]!)]);
  });

  it('a final that looks as the last preview is finalized: Telegram\'s "not modified" is success', async () => {
    const { fake } = await started();
    const preview = previewIn(TOPIC);
    await grow(preview, ["fish & chips"]);
    expect(await preview.finish("fish & chips")).toBe(true);
    expect(fake.callsTo("editMessageText")).toHaveLength(1); // "fish &amp; chips", refused as not modified
    expect(fake.sent.map(visibleText)).toEqual(["fish & chips"]);
  });

  it("a server without drafts: previews are edited messages, and the chat is not asked again", async () => {
    const { lines, log } = captureLog();
    const { fake } = await started({ log });
    fake.draftsSupported = false;
    const first = previewIn(PRIVATE);
    await grow(first, ["The answer", "The answer is **42**"]);
    expect(await first.finish(ANSWER)).toBe(true);
    expect(fake.sent.map((m) => m.text)).toEqual([ANSWER_HTML]);
    expect(fake.callsTo("sendMessageDraft")).toHaveLength(1);

    const second = previewIn({ ...PRIVATE, turnId: "t2" });
    await grow(second, ["Again"]);
    await second.close();
    expect(fake.callsTo("sendMessageDraft")).toHaveLength(1);
    expect(lines.filter((l) => String(l.msg).includes("refused a draft"))).toHaveLength(1);
  });

  it("a 429 on an edit is waited out, and the backlog goes in one edit with the newest text", async () => {
    const { fake } = await started();
    fake.minEditIntervalMs = 3000;
    const preview = previewIn(TOPIC);
    await grow(preview, ["w0"]);
    let text = "w0";
    for (let i = 1; i <= 20; i++) preview.update((text += ` w${i}`));
    await waitFor(() => fake.shown.includes(text), undefined, "the newest text after the wait");
    await preview.close();

    expect(fake.rateLimited).toBe(1);
    // No queue of stale edits: the refused one, then the newest text.
    expect(fake.callsTo("editMessageText")).toHaveLength(2);
    expect(fake.shown).toEqual(["w0", text]);
    expect(fake.earlyRetries).toEqual([]);
  });

  it("the final edit is never dropped: a 429 on it is waited out and it goes again", async () => {
    const { fake } = await started();
    fake.minEditIntervalMs = 3000;
    const preview = previewIn(TOPIC);
    await grow(preview, ["The answer"]);
    expect(await preview.finish(ANSWER)).toBe(true);
    expect(fake.rateLimited).toBe(1);
    expect(fake.earlyRetries).toEqual([]);
    expect(fake.sent).toHaveLength(1);
    expect(fake.sent[0]).toMatchObject({ text: ANSWER_HTML, parseMode: "HTML" });
  });

  it("a preview message that cannot be edited any more leaves the final to a new message", async () => {
    const { fake } = await started();
    const preview = previewIn(TOPIC);
    await grow(preview, ["The answer"]);
    fake.failNextEdit({ code: 400, description: "Bad Request: message to edit not found" });
    preview.update("The answer is");
    await waitFor(() => fake.callsTo("editMessageText").length === 1, undefined, "the failed edit");
    expect(await preview.finish(ANSWER)).toBe(false);
    expect(fake.sent.map(visibleText)).toEqual(["The answer"]);
  });

  it('"typing…" runs until the first text of the turn shows, then ends for that turn', async () => {
    const { fake, channel } = await started();
    const turn: TurnEvent = {
      kind: "turnStart",
      turnId: "t1",
      channel: "telegram",
      chatId: "42",
      metadata: PRIVATE.metadata!,
    };
    channel.onTurn(turn);
    await waitFor(() => fake.callsTo("sendChatAction").length > 0, undefined, "typing");
    expect(channel.isTyping("42")).toBe(true);
    const preview = previewIn(PRIVATE);
    await grow(preview, ["Hello"]);
    expect(channel.isTyping("42")).toBe(false);
    const signals = fake.callsTo("sendChatAction").length;
    await grow(preview, ["Hello there"]);
    await preview.finish("Hello there");
    expect(fake.callsTo("sendChatAction").length).toBe(signals);
    channel.onTurn({ ...turn, kind: "turnEnd", outcome: "done" });
  });

  it("a private chat's topic: the drafts and the final stay in the topic", async () => {
    const { fake } = await started();
    const preview = previewIn({ ...PRIVATE, threadId: "3" });
    await grow(preview, ["The answer"]);
    expect(await preview.finish(ANSWER)).toBe(true);
    expect(fake.drafts.map((d) => d.threadId)).toEqual([3]);
    expect(fake.sent).toHaveLength(1);
    expect(fake.sent[0]).toMatchObject({ threadId: 3, text: ANSWER_HTML });
  });

  it("private chats are told by their type, else by their id (groups and channels are negative)", () => {
    expect(isPrivateChat("-100123", { chatType: "private" })).toBe(true);
    expect(isPrivateChat("42", { chatType: "group" })).toBe(false);
    expect(isPrivateChat("42")).toBe(true);
    expect(isPrivateChat("-100123")).toBe(false);
    expect(isPrivateChat("@news")).toBe(false);
  });

  it("no preview while the channel is not running", async () => {
    r = await rig();
    expect(r.channel.previewSurface(PRIVATE)).toBeUndefined();
  });
});
