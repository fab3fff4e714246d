/**
 * HTML to something a model reads well: markdown or plain text. No network.
 *
 * Pages are untrusted input, so conversion must take bounded time and never
 * hold the event loop: tokenizing (html-tokens.ts) and rendering
 * (html-render.ts) are linear in the page size whatever its shape, and the
 * loop below hands the event loop back every SLICE_MS, so even a 5 MB page
 * lets /healthz and other chats through while it converts. No worker thread
 * is needed because no step is super-linear: doubling a hostile page
 * (unclosed or nested tags, attribute and "<" floods, comments, scripts)
 * doubles the time (bench/html.ts guards each hostile shape).
 */
import { setImmediate as nextTurn } from "node:timers/promises";
import { HtmlRenderer } from "./html-render.js";
import { HtmlTokenizer, type HtmlToken } from "./html-tokens.js";

export { decodeEntities } from "./html-entities.js";

/** Longest stretch of conversion work between two turns of the event loop. */
const SLICE_MS = 10;

export interface ConvertOptions {
  mode: "markdown" | "text";
  /** Relative links and images are made absolute against it. */
  baseUrl?: string;
  /** Conversion stops once this much output exists (the caller cuts it to size anyway). */
  maxChars?: number;
}

export interface ConvertedPage {
  /** The page title, entities decoded and whitespace collapsed; "" when there is none. */
  title: string;
  content: string;
  /** Whether conversion stopped at maxChars with more of the page left. */
  truncated: boolean;
}

/**
 * Readable markdown or text of a page. When the page marks its main content
 * (`<main>`, or a single `<article>`), only that is kept, unless it is empty.
 */
export async function convertHtml(html: string, opts: ConvertOptions): Promise<ConvertedPage> {
  const maxChars = opts.maxChars ?? Number.MAX_SAFE_INTEGER;
  const only = await contentRoot(html);
  let result = await render(html, { ...opts, maxChars, only });
  if (only && !result.content) {
    const title = result.title;
    result = await render(html, { ...opts, maxChars, only: null });
    result.title ||= title;
  }
  return result;
}

/** Markdown of a page (see convertHtml). */
export async function htmlToMarkdown(html: string, baseUrl?: string): Promise<string> {
  return (await convertHtml(html, { mode: "markdown", baseUrl })).content;
}

/** Plain text of a page: tags dropped, blocks on their own lines, entities decoded. */
export async function htmlToText(html: string): Promise<string> {
  return (await convertHtml(html, { mode: "text" })).content;
}

async function render(
  html: string,
  opts: Required<Pick<ConvertOptions, "mode" | "maxChars">> & ConvertOptions & { only: string | null },
): Promise<ConvertedPage> {
  const renderer = new HtmlRenderer(opts);
  const truncated = await eachToken(html, (token) => renderer.feed(token));
  const content = renderer.finish();
  return { title: renderer.title, content, truncated };
}

/** "main" when the page has a <main>, "article" when it has exactly one <article>, else null. */
async function contentRoot(html: string): Promise<string | null> {
  let mains = 0;
  let articles = 0;
  await eachToken(html, (token) => {
    if (token.kind === "start" && token.name === "main") mains++;
    if (token.kind === "start" && token.name === "article") articles++;
    return true;
  });
  if (mains) return "main";
  return articles === 1 ? "article" : null;
}

/**
 * Feeds every token to `visit` until it returns false, yielding to the event
 * loop every SLICE_MS. Returns whether it stopped with some of the page left.
 */
async function eachToken(html: string, visit: (token: HtmlToken) => boolean): Promise<boolean> {
  const tokens = new HtmlTokenizer(html);
  let sliceStart = performance.now();
  for (let token = tokens.next(); token; token = tokens.next()) {
    if (!visit(token)) return tokens.next() !== null;
    // Checked after every token (performance.now() is cheap): a token is at most ~16 KB of work.
    if (performance.now() - sliceStart > SLICE_MS) {
      await nextTurn();
      sliceStart = performance.now();
    }
  }
  return false;
}
