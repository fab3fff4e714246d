/**
 * The open questions of a cluster (approvals/questions.ts in cluster mode): the document
 * "open-questions.json" of palaver.documents (db/documents.ts), the same `{version: 1, open}` as
 * the gateway's `<state>/approvals/open.json`, each entry also carrying what another instance needs
 * to take its answer: the choices, who may answer, when it times out, and the answer once given.
 *
 * How a press reaching instance B answers a question asked by a turn on instance A: B finds the
 * question in its copy of the document, checks the presser and the choice as A would, and records
 * the answer in the entry (`answer`: in a transaction, only into an entry still open and
 * unanswered, so of two presses on two instances one wins). The change reaches A (NOTIFY, or the
 * periodic re-read), whose waiting question then closes (`settle`: removes the entry, returning
 * the recorded answer). A closes its questions the same way when they time out or are stopped, so
 * whichever comes first, a press anywhere or A's own ending, is the one answer.
 */
import * as z from "zod";
import type { Answer, DeskChoice } from "../agent/questions.js";
import { withLegacyPlace } from "../bus/legacy-place.js";
import type { DocumentKind, SharedDocument } from "../util/shared-document.js";

/** An answer given on another instance: a choice, typed words, or both. */
const GivenAnswer = z.object({
  choiceId: z.string().optional(),
  text: z.string().optional(),
  by: z.string(),
});
type GivenAnswer = z.infer<typeof GivenAnswer>;

const SavedChoice = z.object({
  id: z.string(),
  label: z.string(),
  style: z.enum(["primary", "danger"]).optional(),
  verdict: z.string().optional(),
  notice: z.string().optional(),
  words: z.array(z.string()).optional(),
});

/**
 * What is kept of an open question: enough to rewrite its prompt after a restart (the file), and in
 * the cluster's document what another instance needs to answer it. A file of an older version kept
 * the thread in `metadata`: it is read into `threadId`.
 */
export const SavedQuestion = z
  .object({
    id: z.string(),
    kind: z.enum(["approval", "ask_human"]),
    channel: z.string(),
    chatId: z.string(),
    summary: z.string(),
    ref: z.string().optional(),
    threadId: z.string().optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
    // The cluster's document only:
    choices: z.array(SavedChoice).optional(),
    approvers: z.array(z.string()).optional(),
    /** The instance whose turn waits for it. */
    askedBy: z.string().optional(),
    /** When its asker gives up waiting (ms since epoch). */
    expiresAt: z.number().optional(),
    answer: GivenAnswer.optional(),
  })
  .transform(withLegacyPlace);
export type SavedQuestion = z.infer<typeof SavedQuestion>;

export const SavedFile = z.object({ version: z.literal(1), open: z.array(SavedQuestion) });
type SavedFile = z.infer<typeof SavedFile>;

/** The open questions document: the file's schema, also the database row's. */
export const OPEN_QUESTIONS_DOCUMENT: DocumentKind<SavedFile> = {
  schema: SavedFile,
  empty: () => ({ version: 1, open: [] }),
  what: "the open questions",
};

/** A question on the board: the cluster's fields are all there. */
export type BoardQuestion = SavedQuestion & {
  choices: DeskChoice[];
  approvers: string[];
  expiresAt: number;
};

/**
 * How long past its timeout a question may stay on the board before any instance's start takes it
 * for one whose asker died: by then a living asker has long closed it.
 */
export const LEFTOVER_GRACE_MS = 60_000;

export class QuestionBoard {
  constructor(
    private readonly document: SharedDocument<SavedFile>,
    /** This instance's id, recorded as the asker. */
    readonly instance: string,
  ) {}

  /** The open question `id`, as last seen. */
  find(id: string): BoardQuestion | undefined {
    const q = this.document.read().open.find((x) => x.id === id);
    return q && isComplete(q) ? q : undefined;
  }

  /** The open, unanswered questions of a chat, as last seen. */
  inChat(channel: string, chatId: string): BoardQuestion[] {
    return this.document
      .read()
      .open.filter(
        (q): q is BoardQuestion => isComplete(q) && !q.answer && q.channel === channel && q.chatId === chatId,
      );
  }

  /** The questions answered (on any instance) and not yet settled by their askers, as last seen. */
  answered(): { id: string; answer: Answer }[] {
    return this.document
      .read()
      .open.flatMap((q) => (q.answer ? [{ id: q.id, answer: answerOf(q.answer) }] : []));
  }

  /** Calls `listener` when the board changes (another instance answered, asked or closed something). */
  watch(listener: () => void): () => void {
    return this.document.watch?.(listener) ?? (() => undefined);
  }

  /** Puts a question this instance asks on the board. */
  async post(q: BoardQuestion): Promise<void> {
    const entry: SavedQuestion = { ...q, askedBy: this.instance };
    await this.document.update((data) => ({
      next: { ...data, open: [...data.open, entry] },
      result: undefined,
    }));
  }

  /** Records where the prompt was delivered (for its closing edit, wherever it is made). */
  async setRef(id: string, ref: string): Promise<void> {
    await this.document.update((data) => {
      if (!data.open.some((q) => q.id === id)) return { result: undefined };
      return {
        next: { ...data, open: data.open.map((q) => (q.id === id ? { ...q, ref } : q)) },
        result: undefined,
      };
    });
  }

  /** Records an answer given here to a question asked elsewhere; false when it was closed or answered first. */
  async answer(id: string, answer: GivenAnswer): Promise<boolean> {
    return await this.document.update((data) => {
      if (!data.open.some((q) => q.id === id && !q.answer)) return { result: false };
      return {
        next: { ...data, open: data.open.map((q) => (q.id === id ? { ...q, answer } : q)) },
        result: true,
      };
    });
  }

  /** Takes a question of this instance off the board: the answer given elsewhere, if one was. */
  async settle(id: string): Promise<Answer | undefined> {
    return await this.document.update((data) => {
      const q = data.open.find((x) => x.id === id);
      if (!q) return { result: undefined };
      return {
        next: { ...data, open: data.open.filter((x) => x !== q) },
        result: q.answer && answerOf(q.answer),
      };
    });
  }

  /** Takes off the questions whose askers died (see LEFTOVER_GRACE_MS); returns them. */
  async clearLeftovers(now: number): Promise<SavedQuestion[]> {
    const dead = (q: SavedQuestion) => (q.expiresAt ?? 0) + LEFTOVER_GRACE_MS < now;
    return await this.document.update((data) => {
      const gone = data.open.filter(dead);
      if (gone.length === 0) return { result: [] };
      return { next: { ...data, open: data.open.filter((q) => !dead(q)) }, result: gone };
    });
  }
}

function isComplete(q: SavedQuestion): q is BoardQuestion {
  return q.choices !== undefined && q.approvers !== undefined && q.expiresAt !== undefined;
}

/** The recorded answer as the waiting turn takes it. */
function answerOf(given: GivenAnswer): Answer {
  if (given.choiceId !== undefined)
    return {
      choiceId: given.choiceId,
      by: given.by,
      ...(given.text !== undefined ? { text: given.text } : {}),
    };
  return { text: given.text ?? "", by: given.by };
}
