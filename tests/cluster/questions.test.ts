/**
 * Approval and ask_human questions across the instances of a cluster: asked by a turn on A,
 * answered by a press or reply that reaches B (or C), the answer reaching A's waiting call once.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { AskRequest } from "../../src/agent/questions.js";
import {
  QuestionBoard,
  OPEN_QUESTIONS_DOCUMENT,
  LEFTOVER_GRACE_MS,
} from "../../src/approvals/question-board.js";
import { Questions } from "../../src/approvals/questions.js";
import type { OutboundMessage } from "../../src/bus/types.js";
import { DOCUMENT_NAMES, PgDocuments } from "../../src/db/documents.js";
import { logger } from "../../src/log.js";
import { postgresMissing, usePostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";
import { waitFor } from "../helpers/wait.js";

const log = logger("test");
const missing = requireOrSkip(postgresMissing());

const CHOICES: AskRequest["choices"] = [
  {
    id: "approve",
    label: "Approve",
    style: "primary",
    verdict: "✅ Approved",
    notice: "Approved.",
    words: ["y"],
  },
  { id: "deny", label: "Deny", style: "danger", verdict: "❌ Denied", notice: "Denied.", words: ["n"] },
];

function approval(extra: Partial<AskRequest> = {}): AskRequest {
  return {
    kind: "approval",
    channel: "tg",
    chatId: "c1",
    sender: { id: "42", aliases: ["@ann"] },
    text: "May I run `rm -rf build`?",
    summary: "exec rm -rf build",
    choices: CHOICES,
    signal: new AbortController().signal,
    ...extra,
  };
}

interface Instance {
  questions: Questions;
  board: QuestionBoard;
  published: OutboundMessage[];
}

describe.skipIf(missing)("questions across a cluster (real PostgreSQL)", () => {
  const { open, migratedDatabase, notifier } = usePostgres();
  const hubs: PgDocuments[] = [];

  afterEach(() => {
    for (const hub of hubs.splice(0)) hub.stop();
  });

  /** One gateway's question desk, on its own pool and notifier; the re-read timer is out of play (NOTIFY carries changes). */
  async function instance(url: string, name: string, timeoutMs = 600_000): Promise<Instance> {
    const hub = new PgDocuments({ db: open(url, `palaver test ${name}`), log, refreshMs: 600_000 });
    hubs.push(hub);
    const board = new QuestionBoard(
      hub.document(DOCUMENT_NAMES.openQuestions, OPEN_QUESTIONS_DOCUMENT),
      name,
    );
    await hub.start(notifier(url, `test ${name}`));
    const published: OutboundMessage[] = [];
    const questions = new Questions({
      publish: (msg) => published.push(msg),
      timeoutMs,
      admins: () => [],
      allowFrom: () => ["42"],
      board,
      log,
    });
    return { questions, board, published };
  }

  async function cluster(count: number): Promise<Instance[]> {
    const { url } = await migratedDatabase();
    return Promise.all(Array.from({ length: count }, (_, i) => instance(url, String.fromCharCode(97 + i))));
  }

  /** The id of the question `at` published (it publishes once the question is on the board). */
  async function askedId(at: Instance): Promise<string> {
    await waitFor(() => at.published.some((m) => m.kind === "question"), undefined, "the question published");
    return at.published.find((m) => m.kind === "question")!.question!.id;
  }

  const edits = (at: Instance) => at.published.filter((m) => m.kind === "edit");

  it("a press reaching B answers the call waiting on A, once; a second press is told it is closed", async () => {
    const [a, b] = await cluster(2);
    const answer = a!.questions.ask(approval());
    const id = await askedId(a!);
    a!.questions.delivered(id, "msg-9");
    await waitFor(() => b!.board.find(id)?.ref === "msg-9", undefined, "b sees the question and its place");
    expect(b!.questions.openIn("tg", "c1")).toEqual(["exec rm -rf build"]);
    const click = { channel: "tg", chatId: "c1", questionId: id };
    // Not an approver: refused on B as on A, and the question stays open.
    expect(b!.questions.choose({ ...click, senderId: "99", choiceId: "approve" })).toEqual({
      accepted: false,
      notice: "Only 42 can answer this.",
    });
    expect(
      b!.questions.choose({ ...click, senderId: "42", senderAliases: ["@ann"], choiceId: "approve" }),
    ).toEqual({
      accepted: true,
      notice: "Approved.",
    });
    await expect(answer).resolves.toEqual({ choiceId: "approve", by: "@ann" });
    expect(b!.questions.choose({ ...click, senderId: "42", choiceId: "deny" })).toEqual({
      accepted: false,
      notice: "This question is closed.",
    });
    // Settled: off the board everywhere, and A edited its prompt once, with B's presser.
    await waitFor(
      () => b!.board.find(id) === undefined && a!.board.find(id) === undefined,
      undefined,
      "settled",
    );
    expect(a!.questions.choose({ ...click, senderId: "42", choiceId: "deny" }).accepted).toBe(false);
    expect(b!.questions.choose({ ...click, senderId: "42", choiceId: "deny" }).accepted).toBe(false);
    expect(edits(a!)).toEqual([
      expect.objectContaining({
        content: "✅ Approved by @ann: exec rm -rf build",
        edit: { questionId: id, ref: "msg-9" },
      }),
    ]);
    expect(b!.published).toEqual([]);
  });

  it("presses on two other instances at once: one answer reaches A", async () => {
    const [a, b, c] = await cluster(3);
    const answer = a!.questions.ask(approval());
    const id = await askedId(a!);
    await waitFor(() => !!b!.board.find(id) && !!c!.board.find(id), undefined, "b and c see the question");
    const click = { channel: "tg", chatId: "c1", questionId: id, senderId: "42" };
    b!.questions.choose({ ...click, choiceId: "approve" });
    c!.questions.choose({ ...click, choiceId: "deny" });
    const got = await answer;
    expect(["approve", "deny"]).toContain("choiceId" in got ? got.choiceId : undefined);
    await waitFor(
      () => [a, b, c].every((x) => x!.board.find(id) === undefined),
      undefined,
      "settled on every instance",
    );
    expect(edits(a!)).toHaveLength(1);
  });

  it("a typed reply reaching B answers A's ask_human question; a command does not", async () => {
    const [a, b] = await cluster(2);
    const answer = a!.questions.ask(
      approval({
        kind: "ask_human",
        text: "Which folder?",
        summary: "Which folder?",
        choices: [
          { id: "1", label: "src" },
          { id: "2", label: "docs" },
        ],
      }),
    );
    const id = await askedId(a!);
    await waitFor(() => !!b!.board.find(id), undefined, "b sees the question");
    const reply = { channel: "tg", chatId: "c1", senderId: "42", senderAliases: ["@ann"] };
    expect(b!.questions.takeReply({ ...reply, content: "/status" })).toBe(false);
    expect(b!.questions.takeReply({ ...reply, senderId: "99", content: "docs" })).toBe(false);
    expect(b!.questions.takeReply({ ...reply, content: "2" })).toBe(true);
    await expect(answer).resolves.toEqual({ text: "docs", by: "@ann" });
    // Answered already: the next message is an ordinary one.
    expect(b!.questions.takeReply({ ...reply, content: "thanks" })).toBe(false);
  });

  it("A's own timeout closes the question everywhere; a press on B after it is refused", async () => {
    const { url } = await migratedDatabase();
    const a = await instance(url, "a", 300);
    const b = await instance(url, "b");
    const answer = a.questions.ask(approval());
    const id = await askedId(a);
    await expect(answer).resolves.toMatchObject({ timedOut: true });
    await waitFor(() => b.board.find(id) === undefined, undefined, "b sees it closed");
    expect(
      b.questions.choose({
        channel: "tg",
        chatId: "c1",
        questionId: id,
        senderId: "42",
        choiceId: "approve",
      }),
    ).toEqual({
      accepted: false,
      notice: "This question is closed.",
    });
    expect(edits(a).map((e) => e.content)).toEqual([
      "⌛ No answer within 1 second: exec rm -rf build was not run.",
    ]);
  });

  it("at start, expires the questions of an instance that died, and leaves the living ones' alone", async () => {
    const [a, b] = await cluster(2);
    const living = a!.questions.ask(approval());
    const livingId = await askedId(a!);
    // What a dead instance left: a question whose time ran out long ago.
    await b!.board.post({
      id: "dead1",
      kind: "approval",
      channel: "tg",
      chatId: "c1",
      summary: "exec make",
      ref: "msg-1",
      choices: CHOICES,
      approvers: ["42"],
      expiresAt: Date.now() - LEFTOVER_GRACE_MS - 1000,
    });
    b!.questions.expireLeftovers();
    await waitFor(() => edits(b!).length === 1, undefined, "the dead one expired");
    expect(edits(b!)[0]).toMatchObject({
      content: "⌛ Expired (palaver restarted): exec make was not run.",
      edit: { questionId: "dead1", ref: "msg-1" },
    });
    await waitFor(() => a!.board.find("dead1") === undefined, undefined, "off the board");
    expect(a!.board.find(livingId)).toBeDefined();
    b!.questions.choose({
      channel: "tg",
      chatId: "c1",
      questionId: livingId,
      senderId: "42",
      choiceId: "deny",
    });
    await expect(living).resolves.toEqual({ choiceId: "deny", by: "42" });
  });
});
