/**
 * The question desk: asks a person in a chat (an approval prompt, the ask_human tool) and waits for
 * the answer, a button press (`choose`) or a typed reply (`takeReply`), the timeout or the turn's
 * abort (/stop, shutdown). Each question is one "question" message; when it closes, one "edit"
 * rewrites it to say what happened and who decided. Open questions are kept in a small file so a
 * restart can mark their prompts expired (`expireLeftovers`): what they asked about never ran.
 * In cluster mode they are kept on the cluster's board instead (question-board.ts), where a press
 * or reply reaching another instance finds them, and its answer reaches the turn waiting here.
 *
 * Who may answer: the person whose message started the turn, and the channel's admins; for
 * background work (cron, subagents, heartbeat: no sender) the admins, else the channel's allowFrom
 * ids. With nobody, the question is not asked at all.
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname } from "node:path";
import type { InboundMessage, OutboundMessage } from "../bus/types.js";
import type { Answer, AskRequest, DeskChoice } from "../agent/questions.js";
import { parseCommand } from "../bus/commands.js";
import { isSenderAllowed } from "../config/allow-from.js";
import type { ChoiceClick, ChoiceOutcome, QuestionDesk } from "../channels/types.js";
import { logger, type Logger } from "../log.js";
import { mkdirPrivateSync, writeFilePrivateSync } from "../util/private-fs.js";
import { timerDelay } from "../util/timers.js";
import { SavedFile, type QuestionBoard, type SavedQuestion } from "./question-board.js";

export interface QuestionsOptions {
  publish(msg: OutboundMessage): void;
  /** How long a question waits (tools.approval.timeoutSeconds). */
  timeoutMs: number;
  /** channels.<platform>.admins, as the config is now. */
  admins(channel: string): readonly string[];
  /** channels.<platform>.allowFrom, as the config is now (background turns fall back to it). */
  allowFrom(channel: string): readonly string[] | undefined;
  /** Where open questions are kept for expireLeftovers; none: nothing survives a restart (palaver chat). */
  statePath?: string;
  /** Cluster mode: open questions live on the cluster's board, answerable from any instance (statePath unused). */
  board?: QuestionBoard;
  /** Nobody is at the chat to answer (`palaver chat -m`, piped input): every question is refused at once. */
  unattended?: boolean;
  log?: Logger;
}

/** What deciding a press or a reply needs of a question, here or on the board. */
type Answerable = Pick<SavedQuestion, "kind" | "channel" | "chatId"> & {
  choices: DeskChoice[];
  approvers: string[];
};

type OpenQuestion = Omit<SavedQuestion, keyof Answerable> &
  Answerable & {
    close(answer: Answer | { aborted: unknown }): void;
  };

export class Questions implements QuestionDesk {
  private readonly open = new Map<string, OpenQuestion>();
  /** Questions a previous run left open, until expireLeftovers rewrites them. */
  private leftovers: SavedQuestion[];
  /** Board questions of other instances answered here, until the board drops them (a second press is refused). */
  private readonly answeredHere = new Set<string>();
  private readonly log: Logger;

  constructor(private readonly opts: QuestionsOptions) {
    this.log = opts.log ?? logger("questions");
    this.leftovers = opts.board ? [] : this.load();
    opts.board?.watch(() => this.boardChanged());
  }

  /** The ids that may answer a question in this chat for this turn (empty: nobody). */
  approversFor(channel: string, sender?: { id: string; aliases: string[] }): string[] {
    if (this.opts.unattended) return [];
    const admins = this.opts.admins(channel);
    if (sender) return unique([sender.id, ...admins]);
    if (admins.length) return unique([...admins]);
    return unique((this.opts.allowFrom(channel) ?? []).filter((id) => id !== "*"));
  }

  /** Publishes the question and resolves with its answer; rejects with the signal's reason on abort. */
  ask(req: AskRequest): Promise<Answer> {
    req.signal.throwIfAborted();
    const approvers = this.approversFor(req.channel, req.sender);
    if (approvers.length === 0) return Promise.resolve({ nobody: true });
    const id = this.newId();
    const board = this.opts.board;
    return new Promise<Answer>((resolve, reject) => {
      const asked = Date.now();
      // Cluster: settled only after it was posted, or a quick ending would leave it on the board.
      let posted: Promise<unknown> = Promise.resolve();
      const timer = setTimeout(
        () => question.close({ timedOut: true, waitedMs: Date.now() - asked }),
        timerDelay(this.opts.timeoutMs),
      );
      // A question must never keep the process alive by itself.
      timer.unref();
      const onAbort = () => question.close({ aborted: req.signal.reason });
      const question: OpenQuestion = {
        id,
        kind: req.kind,
        channel: req.channel,
        chatId: req.chatId,
        summary: req.summary,
        ...(req.threadId !== undefined ? { threadId: req.threadId } : {}),
        ...(req.metadata ? { metadata: req.metadata } : {}),
        choices: req.choices,
        approvers,
        close: (answer) => {
          if (!this.open.delete(id)) return;
          clearTimeout(timer);
          req.signal.removeEventListener("abort", onAbort);
          const finish = (final: Answer | { aborted: unknown }) => {
            this.publishEdit(question, closingText(question, final, this.opts.timeoutMs));
            // The turn's own abort reason, as every other wait of the turn rejects with it.
            if ("aborted" in final)
              reject(final.aborted instanceof Error ? final.aborted : new Error("aborted"));
            else resolve(final);
          };
          if (!board) {
            this.persist();
            finish(answer);
            return;
          }
          // An answer given on another instance before this ending wins (a stopped turn stays stopped).
          posted
            .then(() => board.settle(id))
            .then(
              (given) => finish(given && !("aborted" in answer) ? given : answer),
              (err: unknown) => {
                this.log.warn({ err, questionId: id }, "cannot take the question off the cluster's board");
                finish(answer);
              },
            );
        },
      };
      this.open.set(id, question);
      req.signal.addEventListener("abort", onAbort, { once: true });
      const message: OutboundMessage = {
        channel: req.channel,
        chatId: req.chatId,
        content: req.text,
        kind: "question",
        question: {
          id,
          choices: req.choices.map(({ id, label, style }) => (style ? { id, label, style } : { id, label })),
        },
        ...(req.threadId !== undefined ? { threadId: req.threadId } : {}),
        ...(req.metadata ? { metadata: req.metadata } : {}),
      };
      if (!board) {
        this.persist();
        this.opts.publish(message);
        return;
      }
      // Asked once it is on the board, so a press reaching any instance finds it.
      posted = board
        .post({
          ...savedOf(question),
          choices: req.choices,
          approvers,
          expiresAt: asked + this.opts.timeoutMs,
        })
        .catch((err: unknown) =>
          this.log.warn(
            { err, questionId: id },
            "cannot put the question on the cluster's board; only this instance can take its answer",
          ),
        )
        .then(() => this.opts.publish(message));
    });
  }

  delivered(questionId: string, ref: string): void {
    const question = this.open.get(questionId);
    if (!question) return;
    question.ref = ref;
    if (!this.opts.board) {
      this.persist();
      return;
    }
    this.opts.board
      .setRef(questionId, ref)
      .catch((err: unknown) =>
        this.log.warn({ err, questionId }, "cannot record the prompt's place on the cluster's board"),
      );
  }

  choose(click: ChoiceClick): ChoiceOutcome {
    const question = this.open.get(click.questionId);
    if (question) {
      const { outcome, answer } = decideClick(question, click);
      if (answer) question.close(answer);
      return outcome;
    }
    // Asked by a turn on another instance of the cluster: the answer goes there through the board.
    const elsewhere = this.opts.board?.find(click.questionId);
    if (!elsewhere || elsewhere.answer || this.answeredHere.has(elsewhere.id))
      return { accepted: false, notice: "This question is closed." };
    const { outcome, answer } = decideClick(elsewhere, click);
    if (answer) this.answerElsewhere(elsewhere.id, answer);
    return outcome;
  }

  /**
   * A chat message that answers a question open in its chat, from someone who may answer it: it
   * closes the question and must not start a turn (true). Commands never answer.
   */
  takeReply(msg: InboundMessage): boolean {
    if (parseCommand(msg.content)) return false;
    const aliases = msg.senderAliases ?? [];
    const answers = (q: Answerable) =>
      q.channel === msg.channel &&
      q.chatId === msg.chatId &&
      isSenderAllowed(msg.senderId, aliases, q.approvers);
    const by = nameOf(msg.senderId, aliases);
    const question = [...this.open.values()].find(answers);
    if (question) {
      question.close(typedAnswer(question, msg.content.trim(), by));
      return true;
    }
    const elsewhere = this.elsewhereIn(msg.channel, msg.chatId).find(answers);
    if (!elsewhere) return false;
    this.answerElsewhere(elsewhere.id, typedAnswer(elsewhere, msg.content.trim(), by));
    return true;
  }

  /** What the open questions of a chat ask about (/status), on every instance of a cluster. */
  openIn(channel: string, chatId: string): string[] {
    return [
      ...[...this.open.values()].filter((q) => q.channel === channel && q.chatId === chatId),
      ...this.elsewhereIn(channel, chatId),
    ].map((q) => q.summary);
  }

  /**
   * Rewrites the prompts a previous run left open (its turns ended with it): their tools never ran.
   * In a cluster, the questions on the board whose askers died (question-board.ts LEFTOVER_GRACE_MS).
   */
  expireLeftovers(): void {
    if (this.opts.board) {
      this.opts.board.clearLeftovers(Date.now()).then(
        (gone) => this.expire(gone),
        (err: unknown) =>
          this.log.warn({ err }, "cannot clear the questions left open on the cluster's board"),
      );
      return;
    }
    const leftovers = this.leftovers;
    this.leftovers = [];
    if (!leftovers.length) return;
    this.expire(leftovers);
    this.persist();
  }

  private expire(leftovers: readonly SavedQuestion[]): void {
    if (!leftovers.length) return;
    for (const q of leftovers) {
      const what = q.kind === "approval" ? `${q.summary} was not run.` : q.summary;
      this.publishEdit(q, `⌛ Expired (palaver restarted): ${what}`);
    }
    this.log.info({ count: leftovers.length }, "questions left open by the previous run marked expired");
  }

  /** Board questions of a chat asked elsewhere that are still to be answered. */
  private elsewhereIn(channel: string, chatId: string) {
    return (this.opts.board?.inChat(channel, chatId) ?? []).filter(
      (q) => !this.open.has(q.id) && !this.answeredHere.has(q.id),
    );
  }

  /** Records an answer given here to a question asked on another instance; its asker closes it. */
  private answerElsewhere(id: string, answer: Answer): void {
    const board = this.opts.board;
    if (!board || !("by" in answer)) return;
    this.answeredHere.add(id);
    const given = {
      by: answer.by,
      ...("choiceId" in answer ? { choiceId: answer.choiceId } : {}),
      ...(answer.text !== undefined ? { text: answer.text } : {}),
    };
    board.answer(id, given).then(
      (taken) => {
        if (!taken) this.log.info({ questionId: id }, "question answered or closed elsewhere first");
      },
      (err: unknown) => {
        this.answeredHere.delete(id);
        this.log.warn({ err, questionId: id }, "cannot record the answer on the cluster's board");
      },
    );
  }

  /** The board changed: questions of this instance answered elsewhere close with that answer. */
  private boardChanged(): void {
    const board = this.opts.board;
    if (!board) return;
    for (const { id, answer } of board.answered()) this.open.get(id)?.close(answer);
    // Forget answers given here once their questions are gone from the board.
    for (const id of this.answeredHere) if (!board.find(id)) this.answeredHere.delete(id);
  }

  private publishEdit(q: SavedQuestion, content: string): void {
    this.opts.publish({
      channel: q.channel,
      chatId: q.chatId,
      content,
      kind: "edit",
      edit: { questionId: q.id, ...(q.ref ? { ref: q.ref } : {}) },
      ...(q.threadId !== undefined ? { threadId: q.threadId } : {}),
      ...(q.metadata ? { metadata: q.metadata } : {}),
    });
  }

  private newId(): string {
    for (;;) {
      const id = BigInt(`0x${randomBytes(6).toString("hex")}`).toString(36);
      if (!this.open.has(id)) return id;
    }
  }

  private load(): SavedQuestion[] {
    const path = this.opts.statePath;
    if (!path) return [];
    let text: string;
    try {
      text = readFileSync(path, "utf8");
    } catch {
      return [];
    }
    try {
      return SavedFile.parse(JSON.parse(text)).open;
    } catch (err) {
      this.log.warn({ err, path }, "open questions file unreadable; ignored");
      return [];
    }
  }

  /** Small and rare (a question opens or closes): written whole, synchronously. A failure is logged, never thrown. */
  private persist(): void {
    const path = this.opts.statePath;
    if (!path) return;
    const open: SavedQuestion[] = [...this.leftovers, ...[...this.open.values()].map(savedOf)];
    try {
      mkdirPrivateSync(dirname(path));
      writeFilePrivateSync(path, `${JSON.stringify({ version: 1, open })}\n`);
    } catch (err) {
      this.log.warn({ err, path }, "could not save the open questions");
    }
  }
}

/** What the file keeps of an open question (see SavedQuestion). */
function savedOf(q: SavedQuestion): SavedQuestion {
  const { id, kind, channel, chatId, summary, ref, threadId, metadata } = q;
  return {
    id,
    kind,
    channel,
    chatId,
    summary,
    ...(ref ? { ref } : {}),
    ...(threadId !== undefined ? { threadId } : {}),
    ...(metadata ? { metadata } : {}),
  };
}

/** Pure: what a button press comes to, the presser's notice and the answer (none when refused). */
function decideClick(q: Answerable, click: ChoiceClick): { outcome: ChoiceOutcome; answer?: Answer } {
  if (q.channel !== click.channel || q.chatId !== click.chatId)
    return { outcome: { accepted: false, notice: "This question is closed." } };
  if (!isSenderAllowed(click.senderId, click.senderAliases ?? [], q.approvers))
    return { outcome: { accepted: false, notice: `Only ${q.approvers.join(" or ")} can answer this.` } };
  const choice = q.choices.find((c) => c.id === click.choiceId);
  if (!choice) return { outcome: { accepted: false, notice: "That is not one of the choices." } };
  const by = nameOf(click.senderId, click.senderAliases);
  // ask_human's answer is the option's words; an approval's is which button.
  const answer: Answer = q.kind === "ask_human" ? { text: choice.label, by } : { choiceId: choice.id, by };
  return { outcome: { accepted: true, notice: choice.notice ?? "Answered." }, answer };
}

/** How a typed line answers: a choice's id, label or words; else, for an approval, a denial in words. */
function typedAnswer(q: Pick<Answerable, "kind" | "choices">, text: string, by: string): Answer {
  const said = text.toLowerCase().replace(/[.!]+$/, "");
  const byNumber = /^\d+$/.test(said) ? q.choices[Number(said) - 1] : undefined;
  const choice =
    (q.kind === "ask_human" ? byNumber : undefined) ??
    q.choices.find((c) => c.id === said || c.label.toLowerCase() === said || (c.words ?? []).includes(said));
  if (choice) return q.kind === "ask_human" ? { text: choice.label, by } : { choiceId: choice.id, by };
  if (q.kind === "ask_human") return { text, by };
  // Anything else the approver writes while asked ("no, use the other folder") refuses the call,
  // and the model is given their words: that message is about this call, not a new request.
  const refusal = q.choices.find((c) => c.style === "danger") ?? q.choices[q.choices.length - 1]!;
  return { choiceId: refusal.id, by, text };
}

function closingText(
  q: Pick<OpenQuestion, "kind" | "summary" | "choices">,
  answer: Answer | { aborted: unknown },
  timeoutMs: number,
): string {
  const notRun = q.kind === "approval" ? `${q.summary} was not run.` : q.summary;
  if ("aborted" in answer) {
    const shutdown = answer.aborted instanceof Error && answer.aborted.message === "shutdown";
    return shutdown ? `⌛ Expired (palaver stopped): ${notRun}` : `⏹ Stopped: ${notRun}`;
  }
  if ("timedOut" in answer) return `⌛ No answer within ${formatWait(timeoutMs)}: ${notRun}`;
  if ("nobody" in answer) return notRun;
  if ("choiceId" in answer) {
    const choice = q.choices.find((c) => c.id === answer.choiceId);
    const said = answer.text ? ` ("${answer.text}")` : "";
    const verdict = choice?.verdict ?? `Answered "${choice?.label ?? answer.choiceId}"`;
    return `${verdict} by ${answer.by}: ${q.summary}${said}`;
  }
  return `❓ ${q.summary}\n💬 ${answer.by}: ${answer.text}`;
}

/** "10 minutes", "1 minute", "30 seconds". */
export function formatWait(ms: number): string {
  if (ms < 60_000) {
    const s = Math.max(1, Math.round(ms / 1000));
    return `${s} second${s === 1 ? "" : "s"}`;
  }
  const m = Math.round(ms / 60_000);
  return `${m} minute${m === 1 ? "" : "s"}`;
}

/** How a person is named in an edit: their @alias when the platform gave one, else their id. */
function nameOf(id: string, aliases: readonly string[] | undefined): string {
  return aliases?.find((a) => a.startsWith("@")) ?? id;
}

function unique(ids: string[]): string[] {
  return [...new Set(ids)];
}
