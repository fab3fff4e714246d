/**
 * What a turn may ask a person and what comes back: the contract between the tools that ask
 * (ask_human here, the approval gate in approvals/gate.ts) and the question desk that implements
 * it (approvals/questions.ts), so the agent never depends on the desk.
 */
import type { Choice } from "../bus/types.js";

type QuestionKind = "approval" | "ask_human";

/** A choice as the desk knows it: what the button says, and what the prompt becomes once chosen. */
export interface DeskChoice extends Choice {
  /** The start of the closing edit ("✅ Approved"), followed by "by <who>: <summary>". */
  verdict?: string;
  /** Shown to the presser alone ("Approved."). */
  notice?: string;
  /** Typed words that pick this choice besides its id and label ("y", "yes"). */
  words?: string[];
}

export interface AskRequest {
  kind: QuestionKind;
  /** The chat to ask in (for background work: its origin chat). */
  channel: string;
  chatId: string;
  /** The thread or topic the turn is in, so the prompt stays in it. */
  threadId?: string;
  /** The chat's metadata (what only its channel reads). */
  metadata?: Record<string, unknown>;
  /** The person whose message started the turn; absent for background work. */
  sender?: { id: string; aliases: string[] };
  /** The prompt's text. */
  text: string;
  /** What is asked about, in a few words, for the closing edit and /status. */
  summary: string;
  choices: DeskChoice[];
  /** The turn's signal: /stop and shutdown close the question and reject. */
  signal: AbortSignal;
}

export type Answer =
  /** A button, or typed text that named a choice; `text` when typed words said more (an approval denied in words). */
  | { choiceId: string; by: string; text?: string }
  /** Typed text that is the answer itself (ask_human). */
  | { text: string; by: string }
  | { timedOut: true; waitedMs: number }
  /** Nobody may answer in this chat: the question was not asked. */
  | { nobody: true };

/** The desk as a tool sees it. */
export interface HumanDesk {
  ask(req: AskRequest): Promise<Answer>;
}
