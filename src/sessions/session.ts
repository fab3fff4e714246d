/**
 * One conversation: its messages as stored in `sessions/<key>.jsonl` plus the
 * bookkeeping nanobot keeps beside them. Pure data; SessionStore persists it.
 */
import type { ChatMessage } from "../llm/types.js";

export interface SessionInit {
  messages?: ChatMessage[];
  createdAt?: Date;
  updatedAt?: Date;
  metadata?: Record<string, unknown>;
  lastConsolidated?: number;
}

export class Session {
  readonly key: string;
  /**
   * The session's messages in file order, from the first one still held in memory: consolidated
   * ones included, except the `forgotten` leading ones.
   */
  messages: ChatMessage[];
  createdAt: Date;
  updatedAt: Date;
  metadata: Record<string, unknown>;
  /**
   * How many leading messages of the session (the forgotten ones included) are already summarised
   * into memory/ (nanobot's last_consolidated).
   */
  lastConsolidated: number;
  /**
   * Leading messages of the file no longer held in memory: consolidated ones, which no turn sends
   * to the model again (forgetConsolidated). Without this a long-lived chat's memory only grows.
   */
  forgotten = 0;

  constructor(key: string, init: SessionInit = {}) {
    const now = new Date();
    this.key = key;
    this.messages = init.messages ?? [];
    this.createdAt = init.createdAt ?? now;
    this.updatedAt = init.updatedAt ?? now;
    this.metadata = init.metadata ?? {};
    this.lastConsolidated = init.lastConsolidated ?? 0;
  }

  /**
   * The messages to send to the model: the unconsolidated tail, at most
   * `maxMessages` of it, starting at a user message, with no tool call that
   * lacks a result and no result that lacks its call (providers reject both).
   */
  history(maxMessages: number): ChatMessage[] {
    return buildHistory(this.messages, this.consolidatedInMemory, maxMessages);
  }

  /** Every message of the session, the forgotten ones counted. */
  get total(): number {
    return this.forgotten + this.messages.length;
  }

  /** How many leading messages of `messages` are consolidated: lastConsolidated as an index into it. */
  get consolidatedInMemory(): number {
    return Math.min(Math.max(0, this.lastConsolidated - this.forgotten), this.messages.length);
  }

  /**
   * Lets go of the consolidated messages (they stay in the file). A new array: whoever still holds
   * the old one (a consolidation comparing it) keeps a consistent copy.
   */
  forgetConsolidated(): void {
    const done = this.consolidatedInMemory;
    if (done === 0) return;
    this.messages = this.messages.slice(done);
    this.forgotten += done;
  }
}

/** Pure core of Session.history(), exported for tests and for callers holding raw arrays. */
export function buildHistory(
  messages: readonly ChatMessage[],
  lastConsolidated: number,
  maxMessages: number,
): ChatMessage[] {
  if (!(maxMessages > 0)) return [];
  const from = Math.min(Math.max(0, Math.floor(lastConsolidated) || 0), messages.length);
  const tail = messages.slice(Math.max(from, messages.length - Math.floor(maxMessages)));

  // Start at a user message: a window opening mid-turn confuses the model and
  // some providers refuse a conversation that does not start with the user.
  const firstUser = tail.findIndex((m) => m.role === "user");
  if (firstUser < 0) return [];

  return dropOrphans(tail.slice(firstUser)).map(toWire);
}

/**
 * Keeps an assistant message with tool calls only when every call is answered
 * by the tool messages right after it (where providers require them), and keeps
 * only tool messages that answer such a call.
 */
function dropOrphans(window: readonly ChatMessage[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  let i = 0;
  while (i < window.length) {
    const msg = window[i]!;
    if (msg.role === "tool") {
      // Any tool message not consumed below answers a call outside the window.
      i++;
      continue;
    }
    const calls = msg.role === "assistant" ? (msg.tool_calls ?? []) : [];
    if (calls.length === 0) {
      out.push(msg);
      i++;
      continue;
    }
    let end = i + 1;
    while (end < window.length && window[end]!.role === "tool") end++;
    const callIds = new Set(calls.map((c) => c.id));
    const results = new Map<string, ChatMessage>();
    for (let j = i + 1; j < end; j++) {
      const id = window[j]!.tool_call_id;
      if (id !== undefined && callIds.has(id) && !results.has(id)) results.set(id, window[j]!);
    }
    if (results.size === callIds.size) {
      out.push(msg);
      // Results in the order the calls were made.
      for (const call of calls) {
        const result = results.get(call.id);
        if (result) {
          out.push(result);
          results.delete(call.id);
        }
      }
    }
    i = end;
  }
  return out;
}

/** Only the fields the chat API understands (timestamps and bookkeeping stay in the file). */
function toWire(msg: ChatMessage): ChatMessage {
  const entry: ChatMessage = { role: msg.role, content: msg.content === undefined ? "" : msg.content };
  // An empty tool_calls array is rejected by some APIs: omit it.
  if (msg.tool_calls?.length) entry.tool_calls = msg.tool_calls;
  if (msg.tool_call_id !== undefined) entry.tool_call_id = msg.tool_call_id;
  if (msg.name !== undefined) entry.name = msg.name;
  return entry;
}
