/**
 * Renders HTML tokens (html-tokens.ts) as markdown or plain text, in one
 * pass with a bounded stack: the work per token is at most MAX_DEPTH steps,
 * so a page costs time linear in its size whatever its shape (thousands of
 * unclosed tags, deep nesting, floods of empty elements).
 *
 * It keeps what a reader (the model) needs: headings, paragraphs, lists,
 * links and images made absolute, emphasis, code, quotes, simple tables.
 * Elements deeper than MAX_DEPTH are treated as if their tags were absent.
 */
import { decodeEntities } from "./html-entities.js";
import type { HtmlToken } from "./html-tokens.js";

/** Open elements kept at most; deeper start tags are ignored (their text stays). */
export const MAX_DEPTH = 64;

/** Elements that never carry the readable content of a page: their content is dropped. */
export const DROPPED_ELEMENTS = new Set([
  "script",
  "style",
  "noscript",
  "nav",
  "template",
  "svg",
  "canvas",
  "iframe",
  "object",
  "embed",
  "form",
  "button",
  "select",
  "textarea",
]);

const VOID = new Set([
  "area",
  "base",
  "br",
  "col",
  "embed",
  "hr",
  "img",
  "input",
  "link",
  "meta",
  "param",
  "source",
  "track",
  "wbr",
]);

/** Blocks set off by a blank line; other blocks get a line of their own. */
const PARAGRAPHS = new Set([
  "p",
  "pre",
  "blockquote",
  "table",
  "dl",
  "figure",
  "address",
  "details",
  "fieldset",
]);
const BLOCKS = new Set([
  "div",
  "section",
  "article",
  "main",
  "header",
  "footer",
  "aside",
  "dt",
  "dd",
  "figcaption",
  "summary",
  "center",
  "caption",
  "hgroup",
  "search",
]);
const HEADINGS = new Set(["h1", "h2", "h3", "h4", "h5", "h6"]);
const EMPHASIS: Record<string, "**" | "_" | "~~" | "`"> = {
  b: "**",
  strong: "**",
  i: "_",
  em: "_",
  s: "~~",
  del: "~~",
  strike: "~~",
  code: "`",
  kbd: "`",
  samp: "`",
  tt: "`",
};
/** Elements that are no boundary for the implicit close of a <p> (or <a>, <h1>...). */
const INLINE = new Set([...Object.keys(EMPHASIS), "a", "span", "font", "small", "big", "sub", "sup", "u", "mark", "abbr", "cite", "q", "label", "time", "var", "bdi", "bdo"]); // prettier-ignore
/** Start tags that close an open <p>, as in HTML. */
const CLOSES_P = new Set([
  ...PARAGRAPHS,
  ...BLOCKS,
  ...HEADINGS,
  "ul",
  "ol",
  "menu",
  "hr",
  "nav",
  "form",
  "li",
]);
/** Never pushed: their start and end tags change nothing (a page may repeat them). */
const TRANSPARENT = new Set(["html", "head", "body"]);

export interface RenderOptions {
  mode: "markdown" | "text";
  /** Relative links and images are made absolute against it. */
  baseUrl?: string;
  /** Rendering stops once the output is this long (the caller truncates anyway). */
  maxChars: number;
  /** Render only what is inside elements of this name (main, article); null for all. */
  only: string | null;
}

interface Frame {
  name: string;
  /** Markup written at close when the element had content ("**", "](url)"). */
  close: string;
  /** The writer's content counter when the element opened: unchanged means empty. */
  contentAtOpen: number;
  /** What the element changed and must undo at close. */
  skip?: boolean;
  only?: boolean;
  emphasis?: "**" | "_" | "~~" | "`";
  link?: boolean;
  pre?: boolean;
  prefix?: boolean;
  cell?: boolean;
  list?: { ordered: boolean; items: number };
  table?: { rows: number };
  row?: { cells: number };
  breakAfter?: 1 | 2;
}

interface Prefix {
  first: string;
  rest: string;
  firstUsed: boolean;
}

export class HtmlRenderer {
  title = "";
  private readonly parts: string[] = [];
  private length = 0;
  private readonly stack: Frame[] = [];
  private readonly prefixes: Prefix[] = [];
  private readonly pendingOpen: string[] = [];
  private breakNeeded = 0;
  private pendingSpace = false;
  private atLineStart = true;
  private trailingNewlines = 0;
  private content = 0;
  private skipping = 0;
  private inside = 0;
  private pre = 0;
  private cells = 0;
  private readonly emphasisDepth: Record<string, number> = { "**": 0, _: 0, "~~": 0, "`": 0 };
  private links = 0;
  private lists = 0;
  private readonly md: boolean;

  constructor(private readonly opts: RenderOptions) {
    this.md = opts.mode === "markdown";
  }

  /** Feeds one token; false once the output is longer than maxChars (rendering can stop). */
  feed(token: HtmlToken): boolean {
    switch (token.kind) {
      case "text":
        this.text(token.text);
        break;
      case "raw":
        if (token.name === "title" && !this.title) this.title = collapse(decodeEntities(token.text)).trim();
        break;
      case "start":
        this.start(token.name, token.attrs, token.selfClosing);
        break;
      case "end":
        this.end(token.name);
        break;
    }
    return this.length <= this.opts.maxChars;
  }

  /** Closes what is still open and returns the output. */
  finish(): string {
    while (this.stack.length) this.pop();
    return this.parts
      .join("")
      .replace(/\n{3,}/g, "\n\n")
      .trim();
  }

  // ------------------------------------------------------------ tags

  private start(name: string, attrs: Record<string, string>, selfClosing: boolean): void {
    if (TRANSPARENT.has(name)) return;
    if (name === "br") return this.lineBreak();
    if (name === "hr") return this.rule();
    if (name === "img") return this.image(attrs);
    if (VOID.has(name) || (selfClosing && !DROPPED_ELEMENTS.has(name))) return;
    this.closeImplied(name);
    if (this.stack.length >= MAX_DEPTH) return;

    const frame: Frame = { name, close: "", contentAtOpen: this.content };
    this.stack.push(frame);
    if (DROPPED_ELEMENTS.has(name)) {
      frame.skip = true;
      this.skipping++;
      return;
    }
    if (name === this.opts.only) {
      frame.only = true;
      this.inside++;
    }
    const emphasis = EMPHASIS[name];
    if (emphasis) return this.openEmphasis(frame, emphasis);
    if (name === "a") return this.openLink(frame, attrs.href);
    if (HEADINGS.has(name)) {
      this.block(frame, 2);
      if (this.md && this.enabled) {
        frame.close = "heading";
        this.pendingOpen.push("#".repeat(Number(name[1])) + " ");
      }
      return;
    }
    if (name === "pre") return this.openPre(frame);
    if (name === "blockquote") {
      this.block(frame, 2);
      if (this.md) this.pushPrefix(frame, "> ", "> ");
      return;
    }
    if (name === "ul" || name === "ol" || name === "menu") {
      this.block(frame, this.lists ? 1 : 2);
      frame.list = { ordered: name === "ol", items: 0 };
      this.lists++;
      return;
    }
    if (name === "li") return this.openItem(frame);
    if (name === "table") {
      this.block(frame, 2);
      frame.table = { rows: 0 };
      return;
    }
    if (name === "tr") {
      this.block(frame, 1);
      frame.row = { cells: 0 };
      return;
    }
    if (name === "td" || name === "th") return this.openCell(frame);
    if (PARAGRAPHS.has(name)) return this.block(frame, 2);
    if (BLOCKS.has(name)) return this.block(frame, 1);
  }

  private end(name: string): void {
    if (TRANSPARENT.has(name)) return;
    if (name === "br") return this.lineBreak();
    for (let i = this.stack.length - 1; i >= 0; i--) {
      if (this.stack[i]!.name === name) {
        while (this.stack.length > i) this.pop();
        return;
      }
    }
  }

  /** HTML's implied end tags: a new <li> ends the open one, a block ends an open <p>... */
  private closeImplied(name: string): void {
    let target: string[] | null = null;
    let stopAt: (f: Frame) => boolean = (f) => !INLINE.has(f.name);
    if (name === "li") {
      target = ["li"];
      stopAt = (f) => f.list !== undefined || f.table !== undefined;
    } else if (name === "dt" || name === "dd") {
      target = ["dt", "dd"];
      stopAt = (f) => f.name === "dl" || f.table !== undefined;
    } else if (name === "tr") {
      target = ["tr"];
      stopAt = (f) => f.table !== undefined;
    } else if (name === "td" || name === "th") {
      target = ["td", "th"];
      stopAt = (f) => f.row !== undefined || f.table !== undefined;
    } else if (name === "a") {
      target = ["a"];
    } else if (HEADINGS.has(name)) {
      target = [...HEADINGS];
    }
    if (CLOSES_P.has(name)) this.closeTo(["p"], (f) => !INLINE.has(f.name));
    if (target) this.closeTo(target, stopAt);
  }

  private closeTo(names: string[], stopAt: (f: Frame) => boolean): void {
    for (let i = this.stack.length - 1; i >= 0; i--) {
      const f = this.stack[i]!;
      if (names.includes(f.name)) {
        while (this.stack.length > i) this.pop();
        return;
      }
      if (stopAt(f)) return;
    }
  }

  private pop(): void {
    const f = this.stack.pop()!;
    const empty = this.content === f.contentAtOpen;
    if (f.skip) this.skipping--;
    if (f.only) this.inside--;
    if (f.emphasis) this.emphasisDepth[f.emphasis]!--;
    if (f.link) this.links--;
    if (f.list) this.lists--;
    if (f.cell) {
      this.cells--;
      if (!this.md) this.raw("\t");
    }
    if (f.pre) {
      this.pre--;
      if (f.close && empty) this.pendingOpen.pop();
      else if (f.close) this.raw(this.atLineStart ? "```" : "\n```");
    } else if (f.close) {
      // Markup opened lazily and never written (an empty element) is withdrawn.
      if (empty) this.pendingOpen.pop();
      else if (f.close !== "heading") this.raw(f.close);
    }
    if (f.row && f.row.cells > 0) this.endRow(f.row.cells);
    if (f.prefix) this.prefixes.pop();
    if (f.breakAfter) this.requestBreak(f.breakAfter);
  }

  // ------------------------------------------------------------ elements

  private block(frame: Frame, lines: 1 | 2): void {
    this.requestBreak(lines);
    frame.breakAfter = lines;
  }

  private openEmphasis(frame: Frame, marker: "**" | "_" | "~~" | "`"): void {
    frame.emphasis = marker;
    // Only the outermost of a kind writes markers: <b><b>x</b></b> is **x**.
    if (this.emphasisDepth[marker]!++ > 0 || !this.md || this.pre || !this.enabled) return;
    frame.close = marker;
    this.pendingOpen.push(marker);
  }

  private openLink(frame: Frame, href: string | undefined): void {
    frame.link = true;
    const target = this.md && !this.links && this.enabled ? this.url(href) : null;
    this.links++;
    if (!target) return;
    frame.close = `](${target})`;
    this.pendingOpen.push("[");
  }

  private openPre(frame: Frame): void {
    this.block(frame, 2);
    frame.pre = true;
    if (this.pre++ === 0 && this.md && this.enabled) {
      frame.close = "```";
      this.pendingOpen.push("```\n");
    }
  }

  private openItem(frame: Frame): void {
    this.block(frame, 1);
    let list: Frame["list"];
    for (let i = this.stack.length - 2; i >= 0 && !list; i--) list = this.stack[i]!.list;
    const number = list ? ++list.items : 1;
    const marker = !this.md ? "- " : list?.ordered ? `${number}. ` : "* ";
    this.pushPrefix(frame, marker, " ".repeat(marker.length));
  }

  private openCell(frame: Frame): void {
    let row: Frame["row"];
    for (let i = this.stack.length - 2; i >= 0 && !row; i--) {
      row = this.stack[i]!.row;
      if (this.stack[i]!.table) break;
    }
    frame.cell = true;
    this.cells++;
    if (!row) return;
    if (this.md) {
      this.flush();
      this.raw(row.cells === 0 ? "| " : " | ");
    }
    row.cells++;
  }

  private endRow(cells: number): void {
    if (!this.md) return this.requestBreak(1);
    this.raw(" |");
    let table: Frame["table"];
    for (let i = this.stack.length - 1; i >= 0 && !table; i--) table = this.stack[i]!.table;
    if (table && table.rows++ === 0) {
      this.requestBreak(1);
      this.flush();
      this.raw("|" + " --- |".repeat(cells));
    }
    this.requestBreak(1);
  }

  private lineBreak(): void {
    if (this.cells) this.pendingSpace = true;
    else this.requestBreak(1);
  }

  private rule(): void {
    this.requestBreak(2);
    if (this.md) {
      this.flush();
      this.raw("---");
    }
    this.requestBreak(2);
  }

  private image(attrs: Record<string, string>): void {
    if (!this.md || !this.enabled) return;
    const src = attrs.src;
    if (!src || /^\s*data:/i.test(src)) return;
    const url = this.url(src);
    if (!url) return;
    const alt = escapeMarkdown(collapse(decodeEntities(attrs.alt ?? "")).trim());
    this.flush();
    this.raw(`![${alt}](${url})`);
  }

  private pushPrefix(frame: Frame, first: string, rest: string): void {
    this.prefixes.push({ first, rest, firstUsed: false });
    frame.prefix = true;
  }

  // ------------------------------------------------------------ writing

  private get enabled(): boolean {
    return this.skipping === 0 && (this.opts.only === null || this.inside > 0);
  }

  private text(raw: string): void {
    if (!this.enabled) return;
    const decoded = decodeEntities(raw);
    if (this.pre) return this.preText(decoded);
    const s = collapse(decoded);
    if (s === "") return;
    if (s === " ") {
      this.pendingSpace = true;
      return;
    }
    const lead = s.startsWith(" ");
    const trail = s.endsWith(" ");
    const core = s.slice(lead ? 1 : 0, trail ? -1 : undefined);
    if (lead) this.pendingSpace = true;
    this.flush();
    const code = this.emphasisDepth["`"]! > 0;
    let out = this.md && !code ? escapeMarkdown(core) : core;
    if (this.md && this.cells) out = out.replaceAll("|", "\\|");
    this.raw(out);
    this.pendingSpace = trail;
  }

  /** Text inside <pre>: kept as written, line by line (each line gets the quote/list prefix). */
  private preText(text: string): void {
    const lines = text.split(/\r?\n/);
    for (let i = 0; i < lines.length; i++) {
      if (i > 0) {
        this.raw("\n");
        this.atLineStart = true;
      }
      if (lines[i]) {
        this.flush();
        this.raw(lines[i]!);
      }
    }
  }

  private requestBreak(lines: 1 | 2): void {
    if (this.cells) {
      this.pendingSpace = true;
      return;
    }
    this.breakNeeded = Math.max(this.breakNeeded, lines);
  }

  /** Writes what waits before content: the line break, the line prefix, a space, opened markup. */
  private flush(): void {
    if (!this.enabled) return;
    if (this.breakNeeded && this.length > 0) {
      const missing = this.breakNeeded - this.trailingNewlines;
      if (missing > 0) this.raw("\n".repeat(missing));
      this.atLineStart = true;
    }
    this.breakNeeded = 0;
    if (this.atLineStart) {
      let prefix = "";
      for (const p of this.prefixes) {
        prefix += p.firstUsed ? p.rest : p.first;
        p.firstUsed = true;
      }
      if (prefix) this.raw(prefix);
      this.atLineStart = false;
    } else if (this.pendingSpace) {
      this.raw(" ");
    }
    this.pendingSpace = false;
    if (this.pendingOpen.length) this.raw(this.pendingOpen.splice(0).join(""));
    this.content++;
  }

  private raw(s: string): void {
    if (!s || !this.enabled) return;
    this.parts.push(s);
    this.length += s.length;
    let n = 0;
    while (n < s.length && s.charCodeAt(s.length - 1 - n) === 10) n++;
    this.trailingNewlines = n === s.length ? this.trailingNewlines + n : n;
    if (n === 0) this.atLineStart = false;
  }

  /** An absolute http(s)/mailto URL (or a #fragment), safe inside markdown parentheses; null otherwise. */
  private url(href: string | undefined): string | null {
    const raw = decodeEntities((href ?? "").trim());
    if (!raw) return null;
    if (raw.startsWith("#")) return encodeParens(raw);
    let url: URL;
    try {
      url = new URL(raw, this.opts.baseUrl);
    } catch {
      return null;
    }
    if (url.protocol !== "http:" && url.protocol !== "https:" && url.protocol !== "mailto:") return null;
    return encodeParens(url.href);
  }
}

/** Whitespace runs to one space (a linear regex: one character class, no alternation). */
function collapse(s: string): string {
  return s.replace(/\s+/g, " ");
}

function escapeMarkdown(s: string): string {
  return s.replace(/[\\*_`[\]]/g, "\\$&");
}

function encodeParens(s: string): string {
  return s.replace(/[()\s]/g, (c) => encodeURIComponent(c).replace("(", "%28").replace(")", "%29"));
}
