/**
 * Pure: how the memory files and session messages are cut into searchable pieces, and how a
 * person's question becomes a full-text query.
 */
import type { ChatMessage } from "../llm/types.js";

export interface Piece {
  /** MEMORY.md: the section's heading; HISTORY.md: the entry's date stamp. */
  label: string;
  text: string;
}

const HEADING = /^#{1,6}\s+(.*)$/;

/** MEMORY.md by section: each heading starts one; text before the first heading is its own piece. */
export function memorySections(text: string): Piece[] {
  const pieces: Piece[] = [];
  let label = "(top)";
  let lines: string[] = [];
  const flush = () => {
    const body = lines.join("\n").trim();
    if (body !== "") pieces.push({ label, text: body });
  };
  for (const line of text.split("\n")) {
    const heading = HEADING.exec(line);
    if (heading) {
      flush();
      label = heading[1]!.trim() || "(untitled)";
      lines = [line];
    } else lines.push(line);
  }
  flush();
  return pieces;
}

const STAMP = /^\[(\d{4}-\d{2}-\d{2}(?: \d{2}:\d{2})?)\]/;

/** HISTORY.md by entry: a paragraph starting with "[YYYY-MM-DD HH:MM]"; unstamped ones join the entry before. */
export function historyEntries(text: string): Piece[] {
  const pieces: Piece[] = [];
  for (const paragraph of text.split(/\n\s*\n/)) {
    const body = paragraph.trim();
    if (body === "") continue;
    const stamp = STAMP.exec(body);
    const last = pieces.at(-1);
    if (!stamp && last) last.text += `\n\n${body}`;
    else pieces.push({ label: stamp ? stamp[1]! : "(undated)", text: body });
  }
  return pieces;
}

/** A message's text: its string content, or the text parts of a multi-part one. */
export function messageText(msg: ChatMessage): string {
  if (typeof msg.content === "string") return msg.content;
  if (!Array.isArray(msg.content)) return "";
  return msg.content
    .map((part) => (part.type === "text" ? part.text : ""))
    .filter((t) => t !== "")
    .join("\n");
}

/** Whether a session message is indexed: what the person and the assistant said; tool results on request. */
export function isIndexed(msg: ChatMessage, includeToolResults: boolean): boolean {
  if (msg.role === "user" || msg.role === "assistant") return true;
  return msg.role === "tool" && includeToolResults;
}

/**
 * Words so common that they only slow a query down and blur its ranking. Short on purpose: BM25
 * already weighs common words down, this only spares it the few that match nearly everything.
 */
const STOPWORDS = new Set(
  (
    "a an and are as at be but by did do does for from had has have how i in is it its me my " +
    "of on or our so that the their them then there these they this to us was we were what " +
    "when where which who why will with you your about again"
  ).split(" "),
);

const CJK = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u;

export function hasCjk(text: string): boolean {
  return CJK.test(text);
}

/**
 * A question as an FTS5 query: its words, each quoted (so no word is read as query syntax), joined
 * with OR so a hit needs only some of them and BM25 ranks those with more, and rarer, words first.
 * Undefined when no word is left.
 */
export function ftsQuery(question: string): string | undefined {
  const words = (question.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).filter(
    (w) => !STOPWORDS.has(w) && !hasCjk(w),
  );
  const unique = [...new Set(words)].slice(0, 32);
  return unique.length ? unique.map((w) => `"${w}"`).join(" OR ") : undefined;
}

/**
 * The CJK runs of a question, for the trigram table: unicode61 keeps a run of CJK characters as
 * one token, so a word inside a sentence would never match. Runs shorter than three characters
 * are kept apart: trigrams cannot match them, they are looked up with LIKE.
 */
export function cjkTerms(question: string): { trigram: string | undefined; short: string[] } {
  const runs =
    question.match(/[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]+/gu) ?? [];
  const long = [...new Set(runs.filter((r) => [...r].length >= 3))];
  const short = [...new Set(runs.filter((r) => [...r].length < 3))];
  return {
    trigram: long.length ? long.map((r) => `"${r}"`).join(" OR ") : undefined,
    short,
  };
}
