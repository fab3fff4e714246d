/**
 * The plan the user can see, on Telegram end to end (Gateway, agent, FakeOpenAI, the real adapter
 * against FakeTelegram): todo_write's checklist is one message of its own, sent once and edited in
 * place (editMessageText on the same message id) as items change, paced like streamed previews,
 * and left showing every item done; the reply is still its own message, shown as a draft while it
 * is written. The checklist is never a draft, never the reply, never journaled.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { messageJournalPath } from "../../../src/daemon/outbox-file.js";
import { toolCall, type FakeOpenAI, type FakeReply } from "../../fakes/openai-server.js";
import { visibleText, type FakeTelegram, type SentMessage } from "../../fakes/telegram-server.js";
import { waitFor } from "../../helpers/wait.js";
import { TelegramGatewayRig } from "./helpers.js";

let rig: TelegramGatewayRig;
let dir: string;
let llm: FakeOpenAI;
let tg: FakeTelegram;

beforeEach(async () => {
  rig = await TelegramGatewayRig.create("palaver-tg-plan-");
  ({ dir, llm, tg } = rig);
});

afterEach(() => rig.close());

async function startGateway(telegram: Record<string, unknown> = {}): Promise<void> {
  await rig.start({ telegram, channels: { streaming: true } });
}

const STEPS = ["Read the notes", "Sum the amounts", "Write report.md"];

/** todo_write with the first `done` steps done and the next one in progress. */
function planWrite(done: number): FakeReply["toolCalls"] {
  const items = STEPS.map((text, i) => ({
    text,
    status: i < done ? "done" : i === done ? "in_progress" : "pending",
  }));
  return [toolCall("todo_write", { items })];
}

const checklistOf = (done: number) =>
  STEPS.map((text, i) => `${i < done ? "☑" : i === done ? "▶" : "☐"} ${text}`).join("\n");
const ALL_DONE = checklistOf(STEPS.length);
const ANSWER = "The report is ready in report.md, with the total of the amounts.";

const isChecklist = (m: SentMessage) => /^[☐▶☑] /.test(visibleText(m));

describe("the plan on Telegram", () => {
  it("is one message edited in place as items change, left all done; the reply streams as a draft", async () => {
    await startGateway({ streamIntervalMs: 250 });
    let call = 0;
    llm.setHandler(async () => {
      call++;
      if (call === 1) return { toolCalls: planWrite(0) };
      // Each next step once the chat shows the one before: a condition, not a clock.
      if (call <= 4) {
        const before = checklistOf(call - 2);
        await tg.waitFor(() => tg.shown.includes(before), 30_000, `"${before}" shown`);
        return { toolCalls: planWrite(call - 1) };
      }
      return { content: ANSWER, pieceChars: 8 };
    });
    tg.userMessage({ text: "make the monthly report" });

    await tg.waitForSent((m) => visibleText(m) === ANSWER, 30_000);
    const plans = () => tg.sent.filter(isChecklist);
    await waitFor(
      () => plans()[0] !== undefined && visibleText(plans()[0]!) === ALL_DONE,
      30_000,
      "all done",
    );

    // One checklist message, sent once with the first plan, then edited in place.
    expect(plans()).toHaveLength(1);
    const plan = plans()[0]!;
    const sends = tg.callsTo("sendMessage").filter((c) => /^[☐▶☑] /.test(String(c.params.text)));
    expect(sends.map((c) => c.params.text)).toEqual([checklistOf(0)]);
    const edits = tg.callsTo("editMessageText");
    expect(edits.length).toBeGreaterThanOrEqual(3);
    expect(edits.every((c) => c.params.message_id === plan.messageId)).toBe(true);
    for (const step of [1, 2]) expect(tg.shown).toContain(checklistOf(step));
    // It quotes nothing (the reply does that) and is never a draft.
    expect(plan.replyTo).toBeUndefined();
    expect(tg.drafts.some((d) => /[☐▶☑]/.test(d.text))).toBe(false);

    // The reply: its own message after drafts of its text.
    expect(tg.drafts.length).toBeGreaterThan(0);
    expect(tg.drafts.every((d) => ANSWER.startsWith(d.text))).toBe(true);
    expect(tg.sent.filter((m) => visibleText(m) === ANSWER)).toHaveLength(1);

    // The plan is no reply: neither the session's answer nor an outbox entry.
    const session = await readFile(join(dir, "ws", "sessions", "telegram_42.jsonl"), "utf8");
    const assistant = session
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { role?: string; content?: unknown })
      .filter((l) => l.role === "assistant" && typeof l.content === "string");
    expect(assistant.map((l) => l.content)).toEqual([ANSWER]);
    // The state folder (the config's) holds the journal; the workspace holds the session.
    const outbox = await readFile(messageJournalPath(dir), "utf8");
    expect(outbox).toContain(ANSWER);
    expect(outbox).not.toContain("Sum the amounts");
  });

  it("many rapid plan writes make bounded edits, and the last state is the one shown", async () => {
    // A long interval: everything written after the first post waits for the turn's end.
    await startGateway({ streamIntervalMs: 60_000 });
    // Eleven different plans (the third step renamed each time), then every step done.
    const renamed = Array.from({ length: 11 }, (_, i) =>
      toolCall("todo_write", {
        items: STEPS.map((text, j) => ({
          text: j === 2 ? `${text} (version ${i})` : text,
          status: j < i % 3 ? "done" : "pending",
        })),
      }),
    );
    llm.enqueue({ toolCalls: [...renamed, ...planWrite(STEPS.length)!] }, { content: "done" });
    tg.userMessage({ text: "go" });

    await tg.waitForSent((m) => visibleText(m) === "done", 30_000);
    const plans = () => tg.sent.filter(isChecklist);
    await waitFor(
      () => plans()[0] !== undefined && visibleText(plans()[0]!) === ALL_DONE,
      30_000,
      "all done",
    );
    expect(plans()).toHaveLength(1);
    // The first checklist posted at once, the last one written over it when the turn ended.
    expect(tg.callsTo("editMessageText").map((c) => c.params.message_id)).toEqual([plans()[0]!.messageId]);
  });
});
