/**
 * The question desk: asks a person in a chat (an approval prompt, the ask_human tool) and waits for
 * the answer, a button press (`choose`) or a typed reply (`takeReply`), the timeout or the turn's
 * abort (/stop, shutdown). Each question is one "question" message; when it closes, one "edit"
 * rewrites it to say what happened and who decided. Open questions are kept in a small file so a
 * restart can mark their prompts expired (`expireLeftovers`): what they asked about never ran.
 *
 * Who may answer: the person whose message started the turn, and the channel's admins; for
 * background work (cron, subagents, heartbeat: no sender) the admins, else the channel's allowFrom
 * ids. With nobody, the question is not asked at all.
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname } from "node:path";
import * as z from "zod";
import type { InboundMessage, OutboundMessage } from "../bus/types.js";
import type { Answer, AskRequest, DeskChoice } from "../agent/questions.js";
import { parseCommand } from "../bus/commands.js";
import { withLegacyPlace } from "../bus/legacy-place.js";
import { isSenderAllowed } from "../config/allow-from.js";
import type { ChoiceClick, ChoiceOutcome, QuestionDesk } from "../channels/types.js";
import { logger, type Logger } from "../log.js";
import { mkdirPrivateSync, writeFilePrivateSync } from "../util/private-fs.js";
import { timerDelay } from "../util/timers.js";

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
  /** Nobody is at the chat to answer (`palaver chat -m`, piped input): every question is refused at once. */
  unattended?: boolean;
  log?: Logger;
}

/**
 * What the state file keeps of an open question: enough to rewrite its prompt after a restart.
 * A file of an older version kept the thread in `metadata`: it is read into `threadId`.
 */
const SavedQuestion = z
  .object({
    id: z.string(),
    kind: z.enum(["approval", "ask_human"]),
    channel: z.string(),
    chatId: z.string(),
    summary: z.string(),
    ref: z.string().optional(),
    threadId: z.string().optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
  })
  .transform(withLegacyPlace);
type SavedQuestion = z.infer<typeof SavedQuestion>;
const SavedFile = z.object({ version: z.literal(1), open: z.array(SavedQuestion) });

interface OpenQuestion extends SavedQuestion {
  choices: DeskChoice[];
  approvers: string[];
  close(answer: Answer | { aborted: unknown }): void;
}

export class Questions implements QuestionDesk {
  private readonly open = new Map<string, OpenQuestion>();
  /** Questions a previous run left open, until expireLeftovers rewrites them. */
  private leftovers: SavedQuestion[];
  private readonly log: Logger;

  constructor(private readonly opts: QuestionsOptions) {
    this.log = opts.log ?? logger("questions");
    this.leftovers = this.load();
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
    return new Promise<Answer>((resolve, reject) => {
      const asked = Date.now();
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
          this.persist();
          this.publishEdit(question, closingText(question, answer, this.opts.timeoutMs));
          // The turn's own abort reason, as every other wait of the turn rejects with it.
          if ("aborted" in answer)
            reject(answer.aborted instanceof Error ? answer.aborted : new Error("aborted"));
          else resolve(answer);
        },
      };
      this.open.set(id, question);
      req.signal.addEventListener("abort", onAbort, { once: true });
      this.persist();
      this.opts.publish({
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
      });
    });
  }

  delivered(questionId: string, ref: string): void {
    const question = this.open.get(questionId);
    if (!question) return;
    question.ref = ref;
    this.persist();
  }

  choose(click: ChoiceClick): ChoiceOutcome {
    const question = this.open.get(click.questionId);
    if (!question || question.channel !== click.channel || question.chatId !== click.chatId)
      return { accepted: false, notice: "This question is closed." };
    if (!isSenderAllowed(click.senderId, click.senderAliases ?? [], question.approvers))
      return { accepted: false, notice: `Only ${question.approvers.join(" or ")} can answer this.` };
    const choice = question.choices.find((c) => c.id === click.choiceId);
    if (!choice) return { accepted: false, notice: "That is not one of the choices." };
    const by = nameOf(click.senderId, click.senderAliases);
    // ask_human's answer is the option's words; an approval's is which button.
    question.close(question.kind === "ask_human" ? { text: choice.label, by } : { choiceId: choice.id, by });
    return { accepted: true, notice: choice.notice ?? "Answered." };
  }

  /**
   * A chat message that answers a question open in its chat, from someone who may answer it: it
   * closes the question and must not start a turn (true). Commands never answer.
   */
  takeReply(msg: InboundMessage): boolean {
    if (parseCommand(msg.content)) return false;
    const aliases = msg.senderAliases ?? [];
    const question = [...this.open.values()].find(
      (q) =>
        q.channel === msg.channel &&
        q.chatId === msg.chatId &&
        isSenderAllowed(msg.senderId, aliases, q.approvers),
    );
    if (!question) return false;
    question.close(typedAnswer(question, msg.content.trim(), nameOf(msg.senderId, aliases)));
    return true;
  }

  /** What the open questions of a chat ask about (/status). */
  openIn(channel: string, chatId: string): string[] {
    return [...this.open.values()]
      .filter((q) => q.channel === channel && q.chatId === chatId)
      .map((q) => q.summary);
  }

  /** Rewrites the prompts a previous run left open (its turns ended with it): their tools never ran. */
  expireLeftovers(): void {
    const leftovers = this.leftovers;
    this.leftovers = [];
    if (!leftovers.length) return;
    for (const q of leftovers) {
      const what = q.kind === "approval" ? `${q.summary} was not run.` : q.summary;
      this.publishEdit(q, `⌛ Expired (palaver restarted): ${what}`);
    }
    this.log.info({ count: leftovers.length }, "questions left open by the previous run marked expired");
    this.persist();
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
    const open: SavedQuestion[] = [
      ...this.leftovers,
      ...[...this.open.values()].map(({ id, kind, channel, chatId, summary, ref, threadId, metadata }) => ({
        id,
        kind,
        channel,
        chatId,
        summary,
        ...(ref ? { ref } : {}),
        ...(threadId !== undefined ? { threadId } : {}),
        ...(metadata ? { metadata } : {}),
      })),
    ];
    try {
      mkdirPrivateSync(dirname(path));
      writeFilePrivateSync(path, `${JSON.stringify({ version: 1, open })}\n`);
    } catch (err) {
      this.log.warn({ err, path }, "could not save the open questions");
    }
  }
}

/** How a typed line answers: a choice's id, label or words; else, for an approval, a denial in words. */
function typedAnswer(q: OpenQuestion, text: string, by: string): Answer {
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

function closingText(q: OpenQuestion, answer: Answer | { aborted: unknown }, timeoutMs: number): string {
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
