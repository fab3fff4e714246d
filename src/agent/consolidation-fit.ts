/**
 * Consolidation requests fitted to the context budget like any other call:
 * a long unconsolidated history is sent in chunks, each as many messages as
 * fit the room left beside the system prompt, the tool and MEMORY.md (itself
 * capped at promptFileMaxChars, as in the chat prompt), and a single message
 * too long for any request is cut. Pure: the counting is passed in.
 */
import type { ChatMessage } from "../llm/types.js";

/** Appended to a message cut to fit the request. */
const CUT_MARK = " […cut to fit the request]";
/** Bound on the rounds of cutting one line (each one shrinks it in proportion). */
const MAX_CUTS = 16;

export interface Chunk {
  /** The first message after the chunk. */
  next: number;
  /** The chunk's conversation lines, joined. */
  text: string;
  /** Their tokens (each line, plus one per line break). */
  tokens: number;
}

/**
 * Messages [from, next) of [from, to) whose lines fit `room` tokens: at least
 * one message, so every chunk makes progress; a first line longer than the
 * room alone is cut to fit it. `line` formats a message (null: no text).
 */
export function takeChunk(
  messages: readonly ChatMessage[],
  from: number,
  to: number,
  room: number,
  line: (msg: ChatMessage) => string | null,
  count: (text: string) => number,
): Chunk {
  const lines: string[] = [];
  let tokens = 0;
  let next = from;
  for (; next < to; next++) {
    const text = line(messages[next]!);
    if (text === null) continue;
    const cost = count(text) + (lines.length ? 1 : 0);
    if (tokens + cost <= room) {
      lines.push(text);
      tokens += cost;
      continue;
    }
    if (lines.length) break;
    const cut = cutToTokens(text, room, count);
    lines.push(cut);
    tokens = count(cut);
    next++;
    break;
  }
  return { next, text: lines.join("\n"), tokens };
}

/** `text` shortened (with CUT_MARK) until it counts at most `maxTokens`; the mark alone at worst. */
function cutToTokens(text: string, maxTokens: number, count: (text: string) => number): string {
  let tokens = count(text);
  if (tokens <= maxTokens) return text;
  let keep = text.length;
  for (let round = 0; round < MAX_CUTS; round++) {
    // In proportion to the overshoot, a little under so a few rounds settle it.
    keep = Math.floor((keep * maxTokens * 0.95) / tokens) - CUT_MARK.length;
    if (keep <= 0) break;
    const cut = text.slice(0, keep) + CUT_MARK;
    tokens = count(cut);
    if (tokens <= maxTokens) return cut;
  }
  return CUT_MARK.trim();
}
