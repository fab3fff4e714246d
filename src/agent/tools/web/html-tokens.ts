/**
 * A linear-time HTML tokenizer for untrusted pages (web_fetch).
 *
 * Why not a library: node-html-markdown (node-html-parser underneath) takes
 * 20+ s on 50 KB of unclosed `<b>` and 40 s on 200 KB of well-formed
 * `<b>x</b>`; every regex over a whole page risks the same. This scanner
 * looks at each character a bounded number of times, whatever the input:
 * every search starts where the previous one ended, and anything left open
 * at the end of the input (a tag, a quote, a comment, a script) ends the
 * scan instead of being retried from the next character.
 *
 * It follows the HTML tokenizer loosely (no tree building, no foreign
 * content); html-render.ts does the little tree logic a reader needs.
 */

export type HtmlToken =
  | { kind: "text"; text: string }
  /** The content of a raw-text element (script, style, title, textarea...), as written. */
  | { kind: "raw"; name: string; text: string }
  | { kind: "start"; name: string; attrs: Record<string, string>; selfClosing: boolean }
  | { kind: "end"; name: string };

/** Elements whose content is text up to their end tag, never markup. */
const RAW_TEXT = new Set([
  "script",
  "style",
  "title",
  "textarea",
  "xmp",
  "iframe",
  "noembed",
  "noframes",
  "noscript",
]);

/** Attributes kept per tag; the rest are scanned over and dropped (nobody reads 10,000 of them). */
const MAX_ATTRIBUTES = 16;
/** Characters of attributes read one by one per tag (quoted values are skipped by indexOf). */
const MAX_TAG_SCAN = 16 * 1024;
/** Text tokens are cut at this length so one token is a bounded amount of work downstream. */
export const MAX_TEXT_TOKEN = 16 * 1024;

const isSpace = (c: number) => c === 32 || c === 9 || c === 10 || c === 12 || c === 13;
const isLetter = (c: number) => (c >= 65 && c <= 90) || (c >= 97 && c <= 122);

export class HtmlTokenizer {
  private pos = 0;
  private readonly pending: HtmlToken[] = [];

  constructor(private readonly html: string) {}

  /** The next token, or null at the end of the input. */
  next(): HtmlToken | null {
    const queued = this.pending.shift();
    if (queued) return queued;
    const { html } = this;
    while (this.pos < html.length) {
      const lt = html.indexOf("<", this.pos);
      if (lt !== this.pos) return this.text(lt < 0 ? html.length : lt);
      const c = html.charCodeAt(lt + 1);
      if (isLetter(c)) return this.startTag(lt);
      if (c === 47 /* / */) {
        const token = this.endTag(lt);
        if (token) return token;
        continue;
      }
      if (c === 33 /* ! */ || c === 63 /* ? */) {
        this.skipDeclaration(lt);
        continue;
      }
      // A "<" that starts nothing is text.
      this.pos = lt + 1;
      return { kind: "text", text: "<" };
    }
    return null;
  }

  private text(end: number): HtmlToken {
    let stop = Math.min(end, this.pos + MAX_TEXT_TOKEN);
    if (stop < end) {
      // Cut at a space so an entity (&amp;) or a surrogate pair stays whole.
      const space = this.html.lastIndexOf(" ", stop);
      if (space > this.pos) stop = space;
    }
    const text = this.html.slice(this.pos, stop);
    this.pos = stop;
    return { kind: "text", text };
  }

  /** Comments, doctype, CDATA, processing instructions: dropped; unterminated ones run to the end. */
  private skipDeclaration(lt: number): void {
    const { html } = this;
    if (html.startsWith("<!--", lt)) {
      const end = html.indexOf("-->", lt + 4);
      this.pos = end < 0 ? html.length : end + 3;
      return;
    }
    const end = html.indexOf(">", lt + 2);
    this.pos = end < 0 ? html.length : end + 1;
  }

  private endTag(lt: number): HtmlToken | null {
    const { html } = this;
    const nameStart = lt + 2;
    if (!isLetter(html.charCodeAt(nameStart))) {
      // "</>" is dropped, "</ x>" is a bogus comment.
      const end = html.indexOf(">", nameStart);
      this.pos = end < 0 ? html.length : end + 1;
      return null;
    }
    const nameEnd = this.nameEnd(nameStart);
    const end = this.skipAttributes(nameEnd, null);
    if (end < 0) {
      this.pos = html.length;
      return null;
    }
    this.pos = end;
    return { kind: "end", name: html.slice(nameStart, nameEnd).toLowerCase() };
  }

  private startTag(lt: number): HtmlToken | null {
    const { html } = this;
    const nameEnd = this.nameEnd(lt + 1);
    const name = html.slice(lt + 1, nameEnd).toLowerCase();
    const attrs: Record<string, string> = {};
    const end = this.skipAttributes(nameEnd, attrs);
    if (end < 0) {
      // End of input inside a tag: the tag and everything after it are dropped.
      this.pos = html.length;
      return null;
    }
    this.pos = end;
    const selfClosing = html.charCodeAt(end - 2) === 47;
    const token: HtmlToken = { kind: "start", name, attrs, selfClosing };
    if (RAW_TEXT.has(name) && !selfClosing) this.pending.push(this.rawText(name));
    return token;
  }

  private nameEnd(from: number): number {
    const { html } = this;
    let i = from;
    while (i < html.length) {
      const c = html.charCodeAt(i);
      if (isSpace(c) || c === 47 || c === 62) break;
      i++;
    }
    return i;
  }

  /**
   * Scans attributes up to and past the closing ">", filling `attrs` (lower-cased
   * names, first one wins). Returns the position after ">", or -1 at end of input.
   */
  private skipAttributes(from: number, attrs: Record<string, string> | null): number {
    const { html } = this;
    let i = from;
    let count = 0;
    const scanLimit = from + MAX_TAG_SCAN;
    while (i < html.length) {
      if (i > scanLimit) {
        // A tag this long is junk: stop reading attributes, end it at the next ">".
        const end = html.indexOf(">", i);
        return end < 0 ? -1 : end + 1;
      }
      const c = html.charCodeAt(i);
      if (isSpace(c) || c === 47) {
        i++;
        continue;
      }
      if (c === 62) return i + 1;
      const nameStart = i;
      i++; // the first character may be "=" (a parse error that browsers accept)
      while (i < html.length) {
        const d = html.charCodeAt(i);
        if (isSpace(d) || d === 47 || d === 62 || d === 61) break;
        i++;
      }
      // Past the cap, attributes are only skipped: no slicing, no allocation.
      const keep = attrs !== null && count < MAX_ATTRIBUTES;
      const name = keep ? html.slice(nameStart, i).toLowerCase() : "";
      while (i < html.length && isSpace(html.charCodeAt(i))) i++;
      let value = "";
      if (html.charCodeAt(i) === 61 /* = */) {
        i++;
        while (i < html.length && isSpace(html.charCodeAt(i))) i++;
        const q = html.charCodeAt(i);
        if (q === 34 || q === 39) {
          const close = html.indexOf(q === 34 ? '"' : "'", i + 1);
          if (close < 0) return -1;
          if (keep) value = html.slice(i + 1, close);
          i = close + 1;
        } else {
          const start = i;
          while (i < html.length) {
            const d = html.charCodeAt(i);
            if (isSpace(d) || d === 62) break;
            i++;
          }
          if (keep) value = html.slice(start, i);
        }
      }
      if (attrs && keep && !(name in attrs)) {
        attrs[name] = value;
        count++;
      }
    }
    return -1;
  }

  /** Everything up to `</name` (any case); an unterminated element runs to the end. */
  private rawText(name: string): HtmlToken {
    const { html } = this;
    const start = this.pos;
    // A literal and a character class: the regex engine finds it in one linear pass.
    const endTag = new RegExp(`</${name}(?:[\\s/>]|$)`, "gi");
    endTag.lastIndex = start;
    const close = endTag.exec(html)?.index ?? html.length;
    this.pos = close; // the end tag itself is the next token
    return { kind: "raw", name, text: html.slice(start, close) };
  }
}
