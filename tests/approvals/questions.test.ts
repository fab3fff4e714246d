import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { OutboundMessage } from "../../src/bus/types.js";
import type { AskRequest } from "../../src/agent/questions.js";
import { Questions, type QuestionsOptions } from "../../src/approvals/questions.js";
import { waitFor } from "../helpers/wait.js";

const CHOICES: AskRequest["choices"] = [
  {
    id: "approve",
    label: "Approve",
    style: "primary",
    verdict: "✅ Approved",
    notice: "Approved.",
    words: ["y", "yes"],
  },
  { id: "deny", label: "Deny", style: "danger", verdict: "❌ Denied", notice: "Denied.", words: ["n", "no"] },
  { id: "always", label: "Always allow this in this chat", words: ["a", "always"] },
];

let dir: string;
let published: OutboundMessage[];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-questions-"));
  published = [];
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

function desk(opts: Partial<QuestionsOptions> = {}): Questions {
  return new Questions({
    publish: (msg) => published.push(msg),
    timeoutMs: 600_000,
    admins: (channel) => (channel === "tg" ? ["boss"] : []),
    allowFrom: () => ["*", "7"],
    statePath: join(dir, "approvals", "open.json"),
    ...opts,
  });
}

function approval(signal = new AbortController().signal, extra: Partial<AskRequest> = {}): AskRequest {
  return {
    kind: "approval",
    channel: "tg",
    chatId: "c1",
    sender: { id: "42", aliases: ["@ann"] },
    text: "May I run `rm -rf build`?",
    summary: "exec rm -rf build",
    choices: CHOICES,
    signal,
    ...extra,
  };
}

const questionOf = (i = 0) => published.filter((m) => m.kind === "question")[i]!;
const edits = () => published.filter((m) => m.kind === "edit");

describe("Questions: buttons", () => {
  it("asks once, takes the sender's press, and edits the prompt with who decided and where it is", async () => {
    const questions = desk();
    const answer = questions.ask(approval());
    const q = questionOf();
    expect(q).toMatchObject({ channel: "tg", chatId: "c1", content: "May I run `rm -rf build`?" });
    expect(q.question!.id).toMatch(/^[a-z0-9]{1,12}$/);
    expect(q.question!.choices).toEqual([
      { id: "approve", label: "Approve", style: "primary" },
      { id: "deny", label: "Deny", style: "danger" },
      { id: "always", label: "Always allow this in this chat" },
    ]);
    questions.delivered(q.question!.id, "msg-9");
    const click = { channel: "tg", chatId: "c1", questionId: q.question!.id };
    expect(
      questions.choose({ ...click, senderId: "42", senderAliases: ["@ann"], choiceId: "approve" }),
    ).toEqual({
      accepted: true,
      notice: "Approved.",
    });
    await expect(answer).resolves.toEqual({ choiceId: "approve", by: "@ann" });
    expect(edits()).toEqual([
      {
        channel: "tg",
        chatId: "c1",
        content: "✅ Approved by @ann: exec rm -rf build",
        kind: "edit",
        edit: { questionId: q.question!.id, ref: "msg-9" },
      },
    ]);
    // Closed now: a second press is told so.
    expect(questions.choose({ ...click, senderId: "42", choiceId: "deny" })).toEqual({
      accepted: false,
      notice: "This question is closed.",
    });
  });

  it("refuses a press by someone who is not an approver and keeps the question open; an admin may answer", async () => {
    const questions = desk();
    const answer = questions.ask(approval());
    const id = questionOf().question!.id;
    const outcome = questions.choose({
      channel: "tg",
      chatId: "c1",
      senderId: "99",
      questionId: id,
      choiceId: "approve",
    });
    expect(outcome).toEqual({ accepted: false, notice: "Only 42 or boss can answer this." });
    expect(questions.openIn("tg", "c1")).toEqual(["exec rm -rf build"]);
    expect(edits()).toEqual([]);
    // The same id from another chat does not reach it either.
    expect(
      questions.choose({ channel: "tg", chatId: "c2", senderId: "42", questionId: id, choiceId: "approve" })
        .accepted,
    ).toBe(false);
    expect(
      questions.choose({ channel: "tg", chatId: "c1", senderId: "boss", questionId: id, choiceId: "deny" }),
    ).toEqual({
      accepted: true,
      notice: "Denied.",
    });
    await expect(answer).resolves.toEqual({ choiceId: "deny", by: "boss" });
    expect(edits()[0]!.content).toBe("❌ Denied by boss: exec rm -rf build");
    expect(questions.openIn("tg", "c1")).toEqual([]);
  });

  it("times out: the answer says so and the prompt says the call was not run", async () => {
    const questions = desk({ timeoutMs: 20 });
    await expect(questions.ask(approval())).resolves.toMatchObject({ timedOut: true });
    expect(edits()[0]!.content).toBe("⌛ No answer within 1 second: exec rm -rf build was not run.");
  });

  it("an abort (/stop) rejects and edits the prompt to Stopped", async () => {
    const questions = desk();
    const stop = new AbortController();
    const answer = questions.ask(approval(stop.signal));
    stop.abort(new Error("stopped by user"));
    await expect(answer).rejects.toThrow("stopped by user");
    expect(edits()[0]!.content).toBe("⏹ Stopped: exec rm -rf build was not run.");
    expect(questions.openIn("tg", "c1")).toEqual([]);
  });
});

describe("Questions: typed replies", () => {
  it("y, n and always answer an approval; commands and other people's messages do not", async () => {
    const questions = desk();
    const first = questions.ask(approval());
    const msg = { channel: "tg", chatId: "c1", senderId: "42" };
    expect(questions.takeReply({ ...msg, content: "/status" })).toBe(false);
    expect(questions.takeReply({ ...msg, senderId: "99", content: "y" })).toBe(false);
    expect(questions.takeReply({ ...msg, chatId: "c2", content: "y" })).toBe(false);
    expect(questions.takeReply({ ...msg, content: "Yes." })).toBe(true);
    await expect(first).resolves.toEqual({ choiceId: "approve", by: "42" });

    const second = questions.ask(approval());
    expect(questions.takeReply({ ...msg, content: "n" })).toBe(true);
    await expect(second).resolves.toEqual({ choiceId: "deny", by: "42" });

    const third = questions.ask(approval());
    expect(questions.takeReply({ ...msg, content: "a" })).toBe(true);
    await expect(third).resolves.toEqual({ choiceId: "always", by: "42" });
    // Nothing open: a message is a message again.
    expect(questions.takeReply({ ...msg, content: "y" })).toBe(false);
  });

  it("other words from the approver deny the call and carry what they said", async () => {
    const questions = desk();
    const answer = questions.ask(approval());
    expect(
      questions.takeReply({ channel: "tg", chatId: "c1", senderId: "42", content: "no, clean dist instead" }),
    ).toBe(true);
    await expect(answer).resolves.toEqual({ choiceId: "deny", by: "42", text: "no, clean dist instead" });
    expect(edits()[0]!.content).toBe('❌ Denied by 42: exec rm -rf build ("no, clean dist instead")');
  });

  it("ask_human: any text is the answer, a number or label picks an option", async () => {
    const questions = desk();
    const ask = (choices: AskRequest["choices"]) =>
      questions.ask(
        approval(undefined, { kind: "ask_human", text: "❓ Which color?", summary: "Which color?", choices }),
      );
    const options = [
      { id: "o1", label: "Red" },
      { id: "o2", label: "Blue" },
    ];
    const msg = { channel: "tg", chatId: "c1", senderId: "42" };
    const byNumber = ask(options);
    questions.takeReply({ ...msg, content: "2" });
    await expect(byNumber).resolves.toEqual({ text: "Blue", by: "42" });
    const free = ask(options);
    questions.takeReply({ ...msg, content: "green, please" });
    await expect(free).resolves.toEqual({ text: "green, please", by: "42" });
    expect(edits()[1]!.content).toBe("❓ Which color?\n💬 42: green, please");
    const pressed = ask(options);
    const id = questionOf(2).question!.id;
    expect(questions.choose({ ...msg, questionId: id, choiceId: "o1" }).accepted).toBe(true);
    await expect(pressed).resolves.toEqual({ text: "Red", by: "42" });
  });
});

describe("Questions: who may answer", () => {
  it("background work: the admins, else allowFrom ids; with nobody the question is not asked", async () => {
    const questions = desk();
    expect(questions.approversFor("tg")).toEqual(["boss"]);
    expect(questions.approversFor("slack")).toEqual(["7"]);
    const none = desk({ allowFrom: () => ["*"] });
    await expect(none.ask(approval(undefined, { channel: "slack", sender: undefined }))).resolves.toEqual({
      nobody: true,
    });
    expect(published).toEqual([]);
  });

  it("unattended (palaver chat -m): nobody, even the sender", async () => {
    await expect(desk({ unattended: true }).ask(approval())).resolves.toEqual({ nobody: true });
    expect(published).toEqual([]);
  });
});

describe("Questions: restarts", () => {
  it("keeps open questions in a private file; the next run marks their prompts expired, with the saved ref", async () => {
    const path = join(dir, "approvals", "open.json");
    const first = desk();
    void first.ask(approval(undefined, { threadId: "t1", metadata: { chatType: "supergroup" } }));
    const id = questionOf().question!.id;
    first.delivered(id, "msg-5");
    await waitFor(async () => (await readFile(path, "utf8")).includes("msg-5"));
    expect((await stat(path)).mode & 0o777).toBe(0o600);

    published = [];
    const next = desk();
    next.expireLeftovers();
    expect(published).toEqual([
      {
        channel: "tg",
        chatId: "c1",
        content: "⌛ Expired (palaver restarted): exec rm -rf build was not run.",
        kind: "edit",
        edit: { questionId: id, ref: "msg-5" },
        threadId: "t1",
        metadata: { chatType: "supergroup" },
      },
    ]);
    expect(JSON.parse(await readFile(path, "utf8"))).toEqual({ version: 1, open: [] });
    // Once only.
    next.expireLeftovers();
    expect(published).toHaveLength(1);
  });

  it("reads the thread of a question an older version saved in its metadata, and rewrites it in that thread", async () => {
    const path = join(dir, "approvals", "open.json");
    await mkdir(join(dir, "approvals"), { recursive: true });
    const saved = {
      id: "q1",
      kind: "approval",
      channel: "telegram",
      chatId: "-1001",
      summary: "exec ls",
      ref: "9",
    };
    const open = [
      { ...saved, metadata: { threadId: 55, chatType: "supergroup" } },
      { ...saved, id: "q2", channel: "slack", chatId: "C1", metadata: { threadTs: "1700000000.000100" } },
    ];
    await writeFile(path, JSON.stringify({ version: 1, open }));
    desk().expireLeftovers();
    expect(edits().map((m) => [m.channel, m.threadId])).toEqual([
      ["telegram", "55"],
      ["slack", "1700000000.000100"],
    ]);
  });
});
