/**
 * A reply streamed into the terminal: the PreviewSurface that channels/live-preview.ts drives for
 * `palaver chat`. It is printed once, rendered as it streams: each line is drawn rendered
 * (format.ts, line by line, code fences followed) as soon as it is complete. The line still being
 * written shows raw on a TTY whose width is known and is redrawn rendered in its place once done;
 * elsewhere it waits for its end. A terminal cannot edit what scrolled away, so nothing already
 * printed is ever printed again: a line that other output (a log line, a typed key) pushed away,
 * or taller than the screen, keeps its raw text and only the rest of it follows.
 *
 * A text that does not extend what was printed (the model's think filter reset it) starts over on
 * a new line. /stop leaves the printed text with the stopped mark.
 */
import type { PreviewSurface } from "../types.js";
import { renderMarkdown } from "./format.js";

/** A local terminal has no rate limit: small steps look like typing. */
const TERMINAL_STREAM_INTERVAL_MS = 50;

const ESC = "\u001b[";
/** What a terminal shows in one message: everything (LivePreview never splits it). */
const NO_LIMIT = Number.MAX_SAFE_INTEGER;
/**
 * Ends every final part: LivePreview skips a final that equals the text shown, but here the final
 * must still be drawn when other output came among the streamed rows. Stripped before printing.
 */
const FINAL_END = "\u0000";

export interface StreamOutput {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
  rows?: number;
}

/**
 * Columns a line takes on a terminal: wide East Asian characters and emoji take two, combining
 * marks and controls none, a tab runs to the next multiple of 8. An estimate, as every terminal's.
 */
export function displayWidth(line: string): number {
  let width = 0;
  for (const ch of line) {
    if (ch === "\t") width += 8 - (width % 8);
    else if (ZERO_WIDTH.test(ch)) continue;
    else if (WIDE.test(ch)) width += 2;
    else width += 1;
  }
  return width;
}

/** Controls, combining marks, zero-width spaces and joiners, variation selectors. */
const ZERO_WIDTH = /^(?:\p{Cc}|\p{Mn}|\p{Me}|[\u200b-\u200f]|[\ufe00-\ufe0f])$/u;
const WIDE =
  /[\u1100-\u115f\u2e80-\u303e\u3041-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua000-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6\u{1f300}-\u{1f64f}\u{1f900}-\u{1f9ff}\u{20000}-\u{3fffd}]/u;

/**
 * The rows `text` occupies when printed from the start of a row on a terminal `columns` wide. A
 * line exactly as wide as the terminal leaves the cursor on its own row (the wrap is deferred).
 */
export function rowsOf(text: string, columns: number): number {
  let rows = 0;
  for (const line of text.split("\n")) rows += Math.max(1, Math.ceil(displayWidth(line) / columns));
  return rows;
}

/** Back to the first of the `rows` the cursor is on the last of, and everything from there cleared. */
export function eraseRows(rows: number): string {
  return `\r${rows > 1 ? `${ESC}${rows - 1}A` : ""}${ESC}J`;
}

/** One reply streamed at the terminal. The adapter closes its line before printing anything else. */
export class TerminalStream {
  /** The raw text the live preview last showed (the text the next update extends). */
  private shown = "";
  /** Complete raw lines of the reply, drawn. */
  private lines: string[] = [];
  /** renderMarkdown(lines): what is on screen for them (a prefix of the next render: it is line by line). */
  private rendered = "";
  /** The raw start of the line being written, on screen after the complete lines. */
  private partial = "";
  /** The partial line cannot be redrawn (other output came after it, or it is taller than the screen). */
  private partialKept = false;
  /** The cursor is at the end of raw text, not at the start of a line. */
  private lineOpen = false;
  private started = false;
  private done = false;

  constructor(
    private readonly output: StreamOutput,
    private readonly color: boolean,
  ) {}

  /** Whether the final or the stopped mark is on screen: nothing more is printed. */
  get finished(): boolean {
    return this.done;
  }

  /** The surface LivePreview drives. One message: refs are all "0". */
  surface(): PreviewSurface {
    return {
      maxChars: NO_LIMIT,
      intervalMs: TERMINAL_STREAM_INTERVAL_MS,
      post: (text) => {
        this.show(text, false);
        return Promise.resolve("0");
      },
      edit: (_ref, text, formatted) => {
        if (formatted) this.finish(text.endsWith(FINAL_END) ? text.slice(0, -FINAL_END.length) : text);
        else this.show(text, false);
        return Promise.resolve();
      },
      // The raw text: this stream renders it, line by line, as the rest.
      finalParts: (content) => [content + FINAL_END],
      stopped: (_ref, text) => {
        this.show(text, true);
        this.end();
        return Promise.resolve();
      },
    };
  }

  /**
   * Other output is about to be printed (a log line, progress, the prompt): the line being written
   * is ended first, and stays as it is (it can no longer be reached to be redrawn).
   */
  interrupt(): void {
    if (!this.started || this.done) return;
    if (this.endPartial()) this.partialKept = true;
  }

  /** The reply is over: its line is ended and a blank line follows, as after a final printed whole. */
  end(): void {
    if (this.done || !this.started) return;
    this.endPartial();
    this.output.write("\n");
    this.done = true;
  }

  /**
   * The line being written, raw, all of it on screen (where it was held back: not a TTY) and ended;
   * false when there is none.
   */
  private endPartial(): boolean {
    // The text after the last complete line (none once the final completed them all).
    const parts = this.shown.split("\n");
    const current = parts.length > this.lines.length ? parts.at(-1)! : "";
    const rest = current.slice(this.partial.length);
    this.partial = current;
    if (rest === "" && !this.lineOpen) return false;
    this.output.write(`${rest}\n`);
    this.lineOpen = false;
    return true;
  }

  private finish(raw: string): void {
    if (this.done) return;
    // The final's last line is complete too.
    this.show(raw, true);
    this.end();
  }

  private show(text: string, final: boolean): void {
    if (this.done) return;
    if (!this.started) {
      // A blank line before the reply, as a final printed whole has.
      this.output.write("\n");
      this.started = true;
    }
    if (!text.startsWith(this.shown)) this.startOver();
    this.shown = text;
    const all = text.split("\n");
    const partial = final ? undefined : all.pop();
    for (const line of all.slice(this.lines.length)) this.completeLine(line);
    if (partial !== undefined) this.showPartial(partial);
  }

  /** The think filter reset the text: what is on screen stays, the new text starts on a new line. */
  private startOver(): void {
    this.endPartial();
    this.output.write("\n");
    this.shown = "";
    this.lines = [];
    this.rendered = "";
    this.partial = "";
    this.partialKept = false;
    this.lineOpen = false;
  }

  /** A line is complete: its raw start is replaced by the line rendered (or, kept, only the rest follows). */
  private completeLine(line: string): void {
    this.lines.push(line);
    const rendered = renderMarkdown(this.lines.join("\n"), { color: this.color });
    const added = rendered.slice(this.rendered.length);
    const hadLines = this.rendered !== "";
    this.rendered = rendered;
    if (this.partialKept) {
      // Ends the line only when the cursor is still on it (an interruption ended it already).
      const rest = line.slice(this.partial.length);
      if (rest !== "" || this.lineOpen) this.output.write(`${rest}\n`);
    } else {
      if (this.partial !== "") this.output.write(eraseRows(rowsOf(this.partial, this.output.columns!)));
      // renderMarkdown joins lines with "\n": after earlier lines, what it adds starts with one.
      if (added !== "") this.output.write(`${hadLines ? added.slice(1) : added}\n`);
    }
    this.partial = "";
    this.partialKept = false;
    this.lineOpen = false;
  }

  /** The line being written, raw, where it can be redrawn later: a TTY of known size, shorter than the screen. */
  private showPartial(partial: string): void {
    const { isTTY, columns, rows } = this.output;
    if (!isTTY || !columns || !rows) return;
    // It only grows: a finished line resets it, a reset text starts over (show).
    const rest = partial.slice(this.partial.length);
    if (rest === "") return;
    this.output.write(rest);
    this.partial = partial;
    this.lineOpen = true;
    // Taller than the screen: its first rows cannot be reached any more; it stays raw.
    if (rowsOf(partial, columns) >= rows) this.partialKept = true;
  }
}
