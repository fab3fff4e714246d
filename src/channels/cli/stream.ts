/**
 * A reply streamed into the terminal: the PreviewSurface that channels/live-preview.ts drives for
 * `palaver chat`. A terminal cannot edit what scrolled away, so the preview is printed as it grows
 * (only the new part each time) and the final replaces it:
 *
 * - on a TTY whose size is known, the streamed rows are erased with ANSI cursor movement (counted
 *   with the terminal's width) and the rendered final (format.ts) is drawn in their place;
 * - otherwise (not a TTY, taller than the screen, or other output came in between so the count no
 *   longer holds) the rendered final is printed below a separator line.
 *
 * A text that does not extend what was printed (the model's think filter reset it) starts over on
 * a new line. /stop leaves the printed text with the stopped mark.
 */
import type { PreviewSurface } from "../types.js";
import { dim, renderMarkdown } from "./format.js";

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

/** What to write to go from `printed` to `text`: the new part, or a new line and the whole text. */
export function streamStep(printed: string, text: string): string {
  return text.startsWith(printed) ? text.slice(printed.length) : `\n${text}`;
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
  /** What the live preview last showed (the text the next update extends). */
  private shown = "";
  /** Everything written since the stream's first row, for counting the rows to erase. */
  private onScreen = "";
  private started = false;
  /** The cursor is at the end of streamed text, not at the start of a line. */
  private lineOpen = false;
  /** Something else was printed among the streamed rows: they can no longer be counted. */
  private interrupted = false;
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
        this.show(text);
        return Promise.resolve("0");
      },
      edit: (_ref, text, formatted) => {
        if (formatted) this.finish(text.endsWith(FINAL_END) ? text.slice(0, -FINAL_END.length) : text);
        else this.show(text);
        return Promise.resolve();
      },
      finalParts: (content) => [renderMarkdown(content, { color: this.color }) + FINAL_END],
      stopped: (_ref, text) => {
        this.show(text);
        this.end();
        return Promise.resolve();
      },
    };
  }

  /**
   * Other output is about to be printed (a log line, progress, the prompt): the streamed line is
   * ended first, and the rows are no longer the stream's alone.
   */
  interrupt(): void {
    if (!this.started || this.done) return;
    this.endLine();
    this.interrupted = true;
  }

  /** The reply is over: its line is ended and a blank line follows, as after a final printed whole. */
  end(): void {
    if (this.done || !this.started) return;
    this.endLine();
    this.output.write("\n");
    this.done = true;
  }

  private show(text: string): void {
    if (this.done) return;
    if (!this.started) {
      // A blank line before the reply, as a final printed whole has.
      this.output.write("\n");
      this.started = true;
    }
    this.write(streamStep(this.shown, text));
    this.shown = text;
  }

  private finish(rendered: string): void {
    if (this.done) return;
    if (rendered === this.shown && !this.interrupted) {
      // The final looks exactly as the streamed text: it is on screen already.
      this.end();
      return;
    }
    this.done = true;
    const rows = this.erasableRows();
    if (rows !== undefined) {
      this.output.write(`${eraseRows(rows)}${rendered}\n\n`);
      return;
    }
    this.endLine();
    this.output.write(`${dim("─".repeat(8), this.color)}\n${rendered}\n\n`);
  }

  /** The rows to erase for the final, or undefined when erasing would not be exact. */
  private erasableRows(): number | undefined {
    const { isTTY, columns, rows } = this.output;
    if (!isTTY || !columns || !rows || this.interrupted || !this.started) return undefined;
    const count = rowsOf(this.onScreen, columns);
    // Rows scrolled off the top of the screen cannot be reached with the cursor.
    return count < rows ? count : undefined;
  }

  private write(text: string): void {
    if (!text) return;
    this.output.write(text);
    this.onScreen += text;
    this.lineOpen = !text.endsWith("\n");
  }

  private endLine(): void {
    if (!this.lineOpen) return;
    this.output.write("\n");
    this.onScreen += "\n";
    this.lineOpen = false;
  }
}
