/**
 * Markdown from the model → Telegram HTML (parse_mode "HTML"). Pure.
 *
 * HTML is the robust choice for Telegram: only `<`, `>` and `&` need
 * escaping, whereas MarkdownV2 rejects a message over any stray `.` or `!`.
 * Each line's inline markup is checked for proper nesting; a line that would
 * produce tangled tags loses its formatting instead of getting the whole
 * message rejected. Long replies are split (in markdown, with splitMessage,
 * so code fences are closed and reopened) before converting, so a tag never
 * straddles two messages.
 */
import { isTableRule, MAX_FORMATTED_LINE, parseHeading, replaceCodeSpans, splitMessage } from "../text.js";

/** Telegram's limit for one message's text. */
export const TELEGRAM_MAX_TEXT = 4096;
/** Telegram's limit for a media caption. */
export const TELEGRAM_MAX_CAPTION = 1024;

/** One outgoing message: the HTML to send, and the markdown to fall back to if Telegram rejects the HTML. */
export interface TelegramChunk {
  html: string;
  plain: string;
}

export function escapeHtml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function escapeAttr(text: string): string {
  return escapeHtml(text).replace(/"/g, "&quot;");
}

const FENCE = /^\s*(`{3,}|~{3,})\s*([^\s`]*)/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;
const BULLET = /^(\s*)[-*+]\s+(?:\[([ xX])\]\s+)?(.*)$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
const TABLE_ROW = /^\s*\|.*\|\s*$/;
const MAX_LANGUAGE = 32;

/** Converts a markdown document to Telegram HTML. */
export function markdownToTelegramHtml(markdown: string): string {
  // NUL delimits placeholders below; it has no business in a chat message.
  const lines = markdown.replace(/\r\n?/g, "\n").replace(/\0/g, "").split("\n");
  const out: string[] = [];
  for (let i = 0; i < lines.length;) {
    const line = lines[i]!;
    const fence = FENCE.exec(line);
    if (fence) {
      const marker = fence[1]!;
      const body: string[] = [];
      i++;
      // An unclosed fence runs to the end, as in every markdown renderer.
      while (i < lines.length && !isClosingFence(lines[i]!, marker)) body.push(lines[i++]!);
      i++;
      out.push(codeBlock(body.join("\n"), fence[2] ?? ""));
      continue;
    }
    if (QUOTE.test(line)) {
      const quoted: string[] = [];
      while (i < lines.length && QUOTE.test(lines[i]!)) quoted.push(QUOTE.exec(lines[i++]!)![1]!);
      out.push(`<blockquote>${quoted.map(blockLine).join("\n")}</blockquote>`);
      continue;
    }
    if (TABLE_ROW.test(line) && i + 1 < lines.length && isTableRule(lines[i + 1]!)) {
      // Telegram has no tables; a monospaced block keeps the columns readable.
      const rows: string[] = [];
      while (i < lines.length && TABLE_ROW.test(lines[i]!)) rows.push(lines[i++]!.trim());
      out.push(`<pre>${escapeHtml(rows.join("\n"))}</pre>`);
      continue;
    }
    out.push(blockLine(line));
    i++;
  }
  return out.join("\n");
}

function isClosingFence(line: string, marker: string): boolean {
  const trimmed = line.trim();
  return trimmed.startsWith(marker[0]!.repeat(marker.length)) && /^(`+|~+)$/.test(trimmed);
}

function codeBlock(code: string, language: string): string {
  const lang = language.replace(/[^\w+#.-]/g, "").slice(0, MAX_LANGUAGE);
  const body = escapeHtml(code);
  return lang ? `<pre><code class="language-${lang}">${body}</code></pre>` : `<pre>${body}</pre>`;
}

function blockLine(line: string): string {
  const heading = parseHeading(line);
  if (heading) return `<b>${inline(heading.text)}</b>`;
  if (RULE.test(line)) return "──────────";
  const bullet = BULLET.exec(line);
  if (bullet) {
    const [, indent = "", task, text = ""] = bullet;
    const mark = task === undefined ? "•" : task === " " ? "☐" : "☑";
    return `${indent}${mark} ${inline(text)}`;
  }
  return inline(line);
}

/**
 * Inline markup of one line. Code spans and links are set aside first (their
 * contents must not be touched by the other rules), the rest is escaped and
 * the emphasis rules applied. Tangled emphasis falls back to the escaped text.
 */
export function inline(text: string): string {
  if (text.length > MAX_FORMATTED_LINE) return escapeHtml(text);
  const held: string[] = [];
  const hold = (html: string) => `\0${held.push(html) - 1}\0`;

  let s = replaceCodeSpans(text, (code) =>
    hold(`<code>${escapeHtml(/^ .+ $/.test(code) ? code.slice(1, -1) : code)}</code>`),
  );
  // Backslash escapes ("\*" is a literal star) are set aside so no rule below sees them.
  s = s.replace(/\\([!-/:-@[-`{-~])/g, (_m, char: string) => hold(escapeHtml(char)));
  s = s.replace(LINK, (whole, label: string, url: string) => {
    if (!safeUrl(url)) return whole;
    const escaped = escapeHtml(label);
    const formatted = emphasis(escaped);
    return hold(`<a href="${escapeAttr(url)}">${wellNested(formatted) ? formatted : escaped}</a>`);
  });
  s = s.replace(/<((?:https?|tg|mailto):[^\s<>]+)>/g, (_m, url: string) =>
    hold(`<a href="${escapeAttr(url)}">${escapeHtml(url)}</a>`),
  );
  // Bare URLs are linked by Telegram itself; emphasis must not cut into them (…/_private_/…).
  s = s.replace(/\bhttps?:\/\/[^\s<>]+/g, (url) => hold(escapeHtml(url)));
  const escaped = escapeHtml(s);
  const formatted = emphasis(escaped);
  return restore(wellNested(formatted) ? formatted : escaped, held);
}

/**
 * [label](url "title"), with one level of parentheses allowed in the URL
 * (Wikipedia links). The label cannot hold "[", so a line of "[" is scanned
 * once, not from every "[" to the end of the line.
 */
const LINK = /\[([^[\]\n]+)\]\(\s*<?((?:[^()\s<>]|\([^()\s]*\))+)>?(?:\s+"[^"]*")?\s*\)/g;

/** Puts the set-aside pieces back; they may nest (a code span inside a link label). */
function restore(text: string, held: readonly string[]): string {
  let out = text;
  for (let depth = 0; depth <= held.length && out.includes("\0"); depth++) {
    out = out.replace(/\0(\d+)\0/g, (_m, n: string) => held[Number(n)] ?? "");
  }
  return out;
}

function safeUrl(url: string): boolean {
  return /^(https?:\/\/|tg:\/\/|mailto:)/i.test(url);
}

/** Bold, italic, strike and spoiler on already escaped text. */
function emphasis(s: string): string {
  return s
    .replace(/\*\*\*(?=\S)([^*\n]+?)(?<=\S)\*\*\*/g, "<b><i>$1</i></b>")
    .replace(/\*\*(?=\S)(.+?)(?<=\S)\*\*/g, "<b>$1</b>")
    .replace(/(?<!\w)__(?=\S)(.+?)(?<=\S)__(?!\w)/g, "<b>$1</b>")
    .replace(/~~(?=\S)(.+?)(?<=\S)~~/g, "<s>$1</s>")
    .replace(/\|\|(?=\S)(.+?)(?<=\S)\|\|/g, "<tg-spoiler>$1</tg-spoiler>")
    .replace(/(?<![\w*])\*(?=[^\s*])([^*\n]*?[^\s*])\*(?![\w*])/g, "<i>$1</i>")
    .replace(/(?<!\w)_(?=[^\s_])([^_\n]*?[^\s_])_(?!\w)/g, "<i>$1</i>");
}

const TAG = /<(\/?)([a-z-]+)(?:\s[^>]*)?>/g;

/** Whether every tag is closed in the right order (what Telegram's parser insists on). */
export function wellNested(html: string): boolean {
  const stack: string[] = [];
  for (const match of html.matchAll(TAG)) {
    const [, closing, name = ""] = match;
    if (!closing) stack.push(name);
    else if (stack.pop() !== name) return false;
  }
  return stack.length === 0;
}

/**
 * Splits a markdown reply into messages that fit Telegram's limit once
 * converted. Each piece is converted on its own, so tags never cross a
 * message boundary; a piece whose HTML grew past the limit (many `&` or
 * `<` become entities) is split again, smaller.
 */
export function formatForTelegram(markdown: string, maxLength = TELEGRAM_MAX_TEXT): TelegramChunk[] {
  const chunks: TelegramChunk[] = [];
  // Most markup is shorter as HTML than the margin; what is not is split again below.
  const pending = splitMessage(markdown.trim(), Math.floor(maxLength * 0.9)).reverse();
  // Every round either emits a chunk or splits one into smaller ones, down to single characters.
  for (let rounds = 0; pending.length > 0 && rounds < 100_000; rounds++) {
    const plain = pending.pop()!;
    if (!plain.trim()) continue;
    const html = markdownToTelegramHtml(plain);
    if (html.length <= maxLength || plain.length <= 1) {
      chunks.push({ html, plain });
      continue;
    }
    const smaller = Math.max(1, Math.floor((plain.length * maxLength) / html.length) - 16);
    pending.push(...splitMessage(plain, Math.min(smaller, plain.length - 1)).reverse());
  }
  return chunks;
}

/** Plain text split for Telegram (progress messages and the fallback when HTML is refused). */
export function splitPlain(text: string, maxLength = TELEGRAM_MAX_TEXT): string[] {
  return splitMessage(text.trim(), maxLength).filter((c) => c.trim().length > 0);
}
