/**
 * `<think>…</think>` removed from a streamed answer as it arrives, for the live preview. The
 * tags may be split across chunks ("<thi" + "nk>"), so a tail that could still become a tag is
 * held back until the next chunk says what it is. Work per chunk is proportional to the chunk
 * (plus a tag's length), so a long answer costs linear time.
 *
 * Only the preview comes from here: the final answer is the whole text through `stripThink`
 * (think.ts), which also knows a leading block that never closed.
 */

const OPEN = "<think>";
const CLOSE = "</think>";

/** The length of the longest end of `text` that is the start of one of `tags` (a tag not yet complete). */
function partialTagAtEnd(text: string, tags: readonly string[]): number {
  for (let n = Math.min(text.length, CLOSE.length - 1); n > 0; n--) {
    const end = text.slice(-n).toLowerCase();
    if (tags.some((tag) => tag.startsWith(end))) return n;
  }
  return 0;
}

export class ThinkFilter {
  private inside = false;
  private held = "";
  private shown = "";

  /** The visible text so far, after `chunk`; leading blank space is not shown. */
  push(chunk: string): string {
    let buf = this.held + chunk;
    this.held = "";
    while (buf) {
      const lower = buf.toLowerCase();
      if (this.inside) {
        const end = lower.indexOf(CLOSE);
        if (end === -1) {
          this.held = buf.slice(buf.length - partialTagAtEnd(buf, [CLOSE]));
          break;
        }
        this.inside = false;
        buf = buf.slice(end + CLOSE.length);
        continue;
      }
      const open = lower.indexOf(OPEN);
      const close = lower.indexOf(CLOSE);
      if (open === -1 && close === -1) {
        const keep = partialTagAtEnd(buf, [OPEN, CLOSE]);
        this.shown += buf.slice(0, buf.length - keep);
        this.held = buf.slice(buf.length - keep);
        break;
      }
      if (close !== -1 && (open === -1 || close < open)) {
        // A close tag with no open tag: the chat template opened the block in the prompt, so
        // everything before it was reasoning, including what the preview already showed.
        this.shown = "";
        buf = buf.slice(close + CLOSE.length);
        continue;
      }
      this.shown += buf.slice(0, open);
      this.inside = true;
      buf = buf.slice(open + OPEN.length);
    }
    return this.shown.trimStart();
  }
}
