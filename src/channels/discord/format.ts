/**
 * Outbound text for Discord, pure. Discord renders Markdown itself, so the
 * model's Markdown is passed through; only what Discord shows as raw text is
 * adjusted (headings below ###, tables), then the text is cut into chunks of
 * at most 2000 characters with code fences kept valid (splitMessage).
 */
import { isTableRule, parseHeading, splitMessage } from "../text.js";

/** Discord's limit on a message's content. */
export const DISCORD_MAX_CHARS = 2000;
/** Discord's limit on files per message. */
export const DISCORD_MAX_FILES = 10;

const FENCE = /^\s*(```|~~~)/;
const TABLE_ROW = /^\s*\|.*\|\s*$/;

/** Markdown the model wrote → Markdown Discord renders. Code blocks are left alone. */
export function toDiscordMarkdown(markdown: string): string {
  const lines = markdown.split("\n");
  const out: string[] = [];
  let inFence = false;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (FENCE.test(line)) {
      inFence = !inFence;
      out.push(line);
      continue;
    }
    if (inFence) {
      out.push(line);
      continue;
    }
    // A table (header row, then a |---| rule): Discord has no tables, a code block keeps the columns.
    if (TABLE_ROW.test(line) && isTableRule(lines[i + 1] ?? "")) {
      let end = i + 2;
      while (end < lines.length && TABLE_ROW.test(lines[end]!)) end++;
      out.push("```", ...lines.slice(i, end), "```");
      i = end - 1;
      continue;
    }
    // Discord renders #, ## and ### only.
    const heading = parseHeading(line);
    out.push(
      heading && heading.level >= 4 && heading.text && !/^\s/.test(line) ? `**${heading.text}**` : line,
    );
  }
  return out.join("\n");
}

/** The messages one reply becomes: each at most `max` characters, fences closed and reopened. */
export function discordChunks(markdown: string, max = DISCORD_MAX_CHARS): string[] {
  const text = toDiscordMarkdown(markdown).trim();
  if (!text) return [];
  return splitMessage(text, max);
}

/** Files in groups Discord accepts in one message. */
export function fileBatches<T>(files: readonly T[], size = DISCORD_MAX_FILES): T[][] {
  const batches: T[][] = [];
  for (let i = 0; i < files.length; i += size) batches.push(files.slice(i, i + size));
  return batches;
}

export interface OutgoingMessage {
  content?: string;
  files?: string[];
}

/** One reply as Discord messages: the text chunks, the files attached to the last one (10 per message). */
export function outgoingMessages(chunks: readonly string[], files: readonly string[]): OutgoingMessage[] {
  const messages: OutgoingMessage[] = chunks.map((content) => ({ content }));
  const batches = fileBatches(files);
  const last = messages[messages.length - 1];
  if (last && batches.length) last.files = batches.shift();
  for (const batch of batches) messages.push({ files: batch });
  return messages;
}
