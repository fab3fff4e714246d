/**
 * Splitting long replies for platforms with a message length limit
 * (Telegram 4096, Discord 2000, Slack ~40k). Pure. Splits at paragraph, then
 * line, then word boundaries, and keeps fenced code blocks valid: a block cut
 * in two is closed at the end of one chunk and reopened (same language) at
 * the start of the next.
 */

const FENCE_CLOSE = "\n```";
/** A break point is only taken when it keeps at least this share of the budget in the chunk. */
const MIN_FILL = 0.3;
const MAX_CHUNKS = 10_000;

export function splitMessage(text: string, maxLength: number): string[] {
  if (text.length <= maxLength) return [text];
  const chunks: string[] = [];
  let rest = text;
  let reopen = "";
  for (let n = 0; rest.length > 0 && n < MAX_CHUNKS; n++) {
    const prefix = reopen ? `${reopen}\n` : "";
    if (prefix.length + rest.length <= maxLength) {
      chunks.push(prefix + rest);
      break;
    }
    // Room for the prefix and a fence close that this chunk may need.
    const budget = Math.max(1, maxLength - prefix.length - FENCE_CLOSE.length);
    const cut = breakPoint(rest, budget);
    const chunk = prefix + rest.slice(0, cut).trimEnd();
    rest = rest.slice(cut).replace(/^\n+/, "");
    const open = openFence(chunk);
    chunks.push(open ? chunk + FENCE_CLOSE : chunk);
    reopen = open ? reopenLine(open) : "";
  }
  return chunks.filter((c) => c.trim().length > 0);
}

/**
 * The fence that reopens a cut code block: its marker and language only. The
 * whole opening line could be as long as the chunk (a reply of 50,000 "~"),
 * leaving one character of progress per chunk: 10,000 chunks, seconds of CPU.
 */
function reopenLine(open: string): string {
  return open.slice(0, 3) + (/^[\w+#.-]{0,32}/.exec(open.slice(3))?.[0] ?? "");
}

/** Where to cut `text` so the first part is at most `budget` characters. */
function breakPoint(text: string, budget: number): number {
  const window = text.slice(0, budget + 1);
  const minimum = Math.floor(budget * MIN_FILL);
  for (const separator of ["\n\n", "\n", " "]) {
    const at = window.lastIndexOf(separator, budget - separator.length);
    if (at >= minimum && at > 0) return separator === " " ? at + 1 : at;
  }
  // No good boundary: cut hard, but never between the halves of a surrogate pair.
  const code = text.charCodeAt(budget - 1);
  return code >= 0xd800 && code <= 0xdbff ? budget - 1 : budget;
}

/** The opening fence line (e.g. "```ts") when `text` ends inside a fenced code block. */
export function openFence(text: string): string | null {
  let open: string | null = null;
  for (const line of text.split("\n")) {
    const fence = /^\s*(```|~~~)/.exec(line);
    if (!fence) continue;
    open = open === null ? line.trim() : null;
  }
  return open;
}

/**
 * Lines longer than this keep their text but lose inline formatting (bold,
 * links...) when converted to a platform's markup. The emphasis rules are
 * regexes that rescan the rest of a line from every opening marker without a
 * closing one: quadratic in the line length, so a 40,000-character line of
 * "a **" took seconds. Capping the line bounds that work at
 * MAX_FORMATTED_LINE per character of the reply.
 */
export const MAX_FORMATTED_LINE = 2000;

/**
 * Replaces every code span (`code`, ``co`de``) of one line with render(code),
 * as CommonMark pairs them: a run of backticks closes at the next run of the
 * same length. One pass over the runs, where the equivalent regex rescans the
 * line from every unmatched run (seconds on a line of 40,000 backticks).
 */
export function replaceCodeSpans(text: string, render: (code: string) => string): string {
  const runs: { start: number; length: number }[] = [];
  for (let i = text.indexOf("`"); i >= 0; i = text.indexOf("`", i)) {
    const start = i;
    while (text.charCodeAt(i) === 96) i++;
    runs.push({ start, length: i - start });
  }
  if (runs.length < 2) return text;
  // For each run, the index of the next run of the same length (or -1).
  const next = new Array<number>(runs.length).fill(-1);
  const lastOfLength = new Map<number, number>();
  for (let r = runs.length - 1; r >= 0; r--) {
    next[r] = lastOfLength.get(runs[r]!.length) ?? -1;
    lastOfLength.set(runs[r]!.length, r);
  }
  let out = "";
  let copied = 0;
  for (let r = 0; r < runs.length;) {
    const close = next[r]!;
    if (close < 0) {
      r++;
      continue;
    }
    const open = runs[r]!;
    out += text.slice(copied, open.start) + render(text.slice(open.start + open.length, runs[close]!.start));
    copied = runs[close]!.start + runs[close]!.length;
    r = close + 1;
  }
  return out + text.slice(copied);
}

/**
 * A markdown ATX heading ("## Title ##") → its level and text, or null.
 * Parsed by hand: the obvious regex (/^#{1,6}\s+(.*?)\s*#*\s*$/) backtracks
 * cubically over trailing whitespace; "#### a" plus 10,000 spaces and an "x"
 * held the event loop for four minutes.
 */
export function parseHeading(line: string): { level: number; text: string } | null {
  const open = /^\s{0,3}(#{1,6})\s+/.exec(line);
  if (!open) return null;
  let end = line.length;
  const space = (i: number) => /\s/.test(line[i - 1] ?? "");
  while (end > open[0].length && space(end)) end--;
  while (end > open[0].length && line[end - 1] === "#") end--; // a closing "##"
  while (end > open[0].length && space(end)) end--;
  return { level: open[1]!.length, text: line.slice(open[0].length, end) };
}

/**
 * Whether a line is a markdown table's delimiter row ("| --- | :-: |"), each
 * cell at least `minDashes` dashes. Checked cell by cell: the one-regex forms
 * (/^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/ and looser ones) backtrack
 * over runs of spaces; 4,000 spaces after a table row took 15 s.
 */
export function isTableRule(line: string, minDashes = 1): boolean {
  let t = line.trim();
  if (t.startsWith("|")) t = t.slice(1);
  if (t.endsWith("|")) t = t.slice(0, -1);
  if (!t.includes("-")) return false;
  const cell = minDashes > 1 ? new RegExp(`^:?-{${minDashes},}:?$`) : /^:?-+:?$/;
  return t.split("|").every((c) => cell.test(c.trim()));
}
