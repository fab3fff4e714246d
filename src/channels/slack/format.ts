/**
 * Markdown (what the model writes) → Slack mrkdwn, and Slack's message markup
 * → plain text (what the model reads). Pure.
 *
 * mrkdwn differs from Markdown: *bold*, _italic_, ~strike~, <url|text> links,
 * no headings, no tables, no language on code fences, and `&`, `<`, `>` must
 * be escaped everywhere (inside code too) because `<...>` is Slack's own markup.
 */
import { isTableRule, MAX_FORMATTED_LINE, parseHeading, replaceCodeSpans, splitMessage } from "../text.js";

/**
 * Characters per message. Slack accepts up to 40,000 but recommends at most
 * 4,000 in `text`: longer messages are collapsed behind "Show more" and some
 * clients render them badly. Under 4,000 (with room for a fence that
 * splitMessage closes and reopens) every chunk displays in full.
 */
export const SLACK_MESSAGE_LIMIT = 3900;

/** Markdown → mrkdwn chunks, each under SLACK_MESSAGE_LIMIT, split at paragraph/line boundaries. */
export function formatSlackMessage(markdown: string, limit = SLACK_MESSAGE_LIMIT): string[] {
  const text = markdownToMrkdwn(markdown).trim();
  if (!text) return [];
  return splitMessage(text, limit);
}

/** `&`, `<`, `>` as Slack requires them in message text. */
export function escapeMrkdwn(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

const FENCE = /^\s*(```|~~~)/;
const MAX_LINES = 100_000;

export function markdownToMrkdwn(markdown: string): string {
  const lines = markdown.replace(/\r\n?/g, "\n").split("\n");
  const out: string[] = [];
  for (let i = 0; i < lines.length && i < MAX_LINES; i++) {
    const line = lines[i]!;
    const fence = FENCE.exec(line);
    if (fence) {
      // A fenced block: the language tag would show as code in Slack, so it goes.
      const marker = fence[1]!;
      const body: string[] = [];
      let j = i + 1;
      while (j < lines.length && !lines[j]!.trim().startsWith(marker)) body.push(lines[j++]!);
      out.push("```", ...body.map(escapeMrkdwn), "```");
      i = j; // the closing fence (or the end of the text when it was never closed)
      continue;
    }
    if (isTableRow(line) && i + 1 < lines.length && isTableRule(lines[i + 1]!, 2)) {
      const rows = [line];
      let j = i + 2;
      while (j < lines.length && isTableRow(lines[j]!)) rows.push(lines[j++]!);
      out.push(...renderTable(rows[0]!, rows.slice(1)));
      i = j - 1;
      continue;
    }
    out.push(convertLine(line));
  }
  return out.join("\n");
}

function isTableRow(line: string): boolean {
  const t = line.trim();
  return t.startsWith("|") && t.length > 1 && t.includes("|", 1);
}

function convertLine(line: string): string {
  const heading = parseHeading(line);
  if (heading) {
    const text = heading.text.replace(/\*\*|__/g, "");
    return text ? `*${convertInline(text)}*` : "";
  }
  if (/^\s{0,3}([-*_])(\s*\1){2,}\s*$/.test(line)) return "──────────";
  const quote = /^\s*>/.exec(line);
  if (quote) {
    // Slack quotes one level: nested markers (> > >) are dropped in a loop, not by
    // recursion, which a line of 20,000 ">" overflowed (the whole reply failed).
    const inner = line.replace(/^(?:\s*>)+\s?/, "");
    return `&gt; ${convertLine(inner)}`.trimEnd();
  }
  const task = /^(\s*)[-*+]\s+\[([ xX])\]\s+(.*)$/.exec(line);
  if (task) return `${indent(task[1]!)}${task[2] === " " ? "☐" : "☑"} ${convertInline(task[3]!)}`;
  const bullet = /^(\s*)[-*+]\s+(.*)$/.exec(line);
  if (bullet) {
    const depth = Math.floor(bullet[1]!.replace(/\t/g, "  ").length / 2);
    return `${indent(bullet[1]!)}${depth % 2 === 0 ? "•" : "◦"} ${convertInline(bullet[2]!)}`;
  }
  const numbered = /^(\s*)(\d{1,9})[.)]\s+(.*)$/.exec(line);
  if (numbered) return `${indent(numbered[1]!)}${numbered[2]}. ${convertInline(numbered[3]!)}`;
  return convertInline(line);
}

/** Nested list items: four spaces per level read well in Slack. */
function indent(leading: string): string {
  const depth = Math.floor(leading.replace(/\t/g, "  ").length / 2);
  return "    ".repeat(depth);
}

// Private-use characters stand in for already converted pieces while the rest is rewritten.
const SLOT_OPEN = "\uE000";
const SLOT_CLOSE = "\uE001";
const BOLD = "\uE002";
const ITALIC = "\uE003";

/** Inline Markdown of one line → mrkdwn: code, links, emphasis, escaping. */
export function convertInline(text: string): string {
  if (text.length > MAX_FORMATTED_LINE) return escapeMrkdwn(text);
  const slots: string[] = [];
  const keep = (s: string) => `${SLOT_OPEN}${slots.push(s) - 1}${SLOT_CLOSE}`;
  let s = text.replace(new RegExp(`[${SLOT_OPEN}${SLOT_CLOSE}${BOLD}${ITALIC}]`, "g"), "");

  // Code spans first: nothing inside them is formatting.
  s = replaceCodeSpans(s, (code) => keep(`\`${escapeMrkdwn(code.trim() || code)}\``));
  // Images and links: ![alt](url), [text](url "title"), <https://autolink>. Neither label
  // nor URL can hold the character that starts the next one ("[", "("), so a line of
  // "[a](" is scanned once instead of from every "[" to the end.
  s = s.replace(
    /(!?)\[([^[\]\n]*)\]\(\s*<?([^()\s<>]+)>?(?:\s+"[^"]*")?\s*\)/g,
    (_m, _bang: string, label: string, url: string) =>
      keep(link(url, label ? convertEmphasis(escapeMrkdwn(label)) : "")),
  );
  s = s.replace(/<((?:https?|mailto):[^<>\s]+)>/g, (_m, url: string) => keep(link(url, "")));
  // Bare URLs stay as they are (Slack links them), but must not be touched by emphasis rules.
  s = s.replace(/\bhttps?:\/\/[^\s<>]*[^\s<>.,;:!?'")\]]/g, (url) => keep(escapeMrkdwn(url)));

  // Backslash escapes: the character itself, never formatting.
  s = s.replace(/\\([\\`*_{}[\]()#+\-.!~|>])/g, (_m, c: string) => keep(escapeMrkdwn(c)));

  s = convertEmphasis(escapeMrkdwn(s));
  // Several rounds: a link label may itself hold a code span's slot.
  for (let n = 0; n < 8 && s.includes(SLOT_OPEN); n++) {
    s = s.replace(
      new RegExp(`${SLOT_OPEN}(\\d+)${SLOT_CLOSE}`, "g"),
      (_m, i: string) => slots[Number(i)] ?? "",
    );
  }
  return s;
}

function link(url: string, label: string): string {
  const target = escapeMrkdwn(url.replace(/&amp;/g, "&")).replace(/\|/g, "%7C");
  return label && label !== target ? `<${target}|${label.replace(/\|/g, "¦")}>` : `<${target}>`;
}

/** **bold** / __bold__ → *bold*, *it* / _it_ → _it_, ~~strike~~ → ~strike~, on escaped text. */
function convertEmphasis(s: string): string {
  let out = s;
  out = out.replace(/\*\*\*(?=\S)([^*\n]*?\S)\*\*\*/g, `${BOLD}${ITALIC}$1${ITALIC}${BOLD}`);
  out = out.replace(/\*\*(?=\S)([^\n]*?\S)\*\*/g, `${BOLD}$1${BOLD}`);
  out = out.replace(/(^|[^\w])__(?=\S)([^\n]*?\S)__(?!\w)/g, `$1${BOLD}$2${BOLD}`);
  out = out.replace(/(^|[^\w*])\*(?=[^\s*])([^*\n]*?[^\s*])\*(?![\w*])/g, `$1${ITALIC}$2${ITALIC}`);
  out = out.replace(/(^|[^\w_])_(?=[^\s_])([^_\n]*?[^\s_])_(?![\w_])/g, `$1${ITALIC}$2${ITALIC}`);
  out = out.replace(/~~(?=\S)([^~\n]*?\S)~~/g, "~$1~");
  return out.replace(new RegExp(BOLD, "g"), "*").replace(new RegExp(ITALIC, "g"), "_");
}

/** Tables: aligned columns in a code block when narrow enough, else one line per row. */
const MAX_TABLE_WIDTH = 72;

function renderTable(header: string, rows: string[]): string[] {
  const head = cells(header);
  const body = rows.map(cells);
  const columns = Math.max(head.length, ...body.map((r) => r.length));
  const grid = [head, ...body].map((r) => Array.from({ length: columns }, (_v, i) => plain(r[i] ?? "")));
  const widths = Array.from({ length: columns }, (_v, i) => Math.max(...grid.map((r) => r[i]!.length)));
  const total = widths.reduce((a, b) => a + b, 0) + 3 * (columns - 1);
  if (total <= MAX_TABLE_WIDTH) {
    const line = (r: string[]) =>
      r
        .map((c, i) => c.padEnd(widths[i]!))
        .join(" │ ")
        .trimEnd();
    const rule = widths.map((w) => "─".repeat(w)).join("─┼─");
    return ["```", ...[line(grid[0]!), rule, ...grid.slice(1).map(line)].map(escapeMrkdwn), "```"];
  }
  return grid.slice(1).map((r) => {
    const parts = r
      .map((c, i) => (c ? `*${escapeMrkdwn(grid[0]![i] || `${i + 1}`)}:* ${escapeMrkdwn(c)}` : ""))
      .filter(Boolean);
    return `• ${parts.join(" · ")}`;
  });
}

function cells(row: string): string[] {
  const t = row.trim().replace(/^\|/, "").replace(/\|$/, "");
  return t.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, "|"));
}

/** Cell text without Markdown markers (inside a code block they would show literally). */
function plain(cell: string): string {
  return cell
    .replace(/!?\[([^\]]*)\]\(([^)\s]+)[^)]*\)/g, (_m, text: string, url: string) =>
      text ? `${text} (${url})` : url,
    )
    .replace(/(\*\*|__|~~|`)/g, "")
    .replace(/(^|\s)[*_]([^*_]+)[*_](?=\s|$)/g, "$1$2");
}

/**
 * Slack message text → plain text for the model: `<url|text>` links,
 * `<#C1|name>` channels, `<!here>` and the `&amp;` escapes undone. User
 * mentions `<@U1>` are kept, so the model can mention people back.
 */
export function slackToPlainText(text: string): string {
  return text
    .replace(/<([^<>]+)>/g, (whole, inner: string) => {
      if (inner.startsWith("@")) return whole;
      const [target = "", label] = inner.split("|", 2);
      if (target.startsWith("#")) return label ? `#${label}` : target;
      if (target.startsWith("!subteam^")) return label ?? "@group";
      if (target.startsWith("!date^")) return label ?? target;
      if (target.startsWith("!")) return `@${target.slice(1)}`;
      const url = target.replace(/^mailto:/, "");
      return label && label !== url ? `${label} (${url})` : url;
    })
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&amp;/g, "&");
}
