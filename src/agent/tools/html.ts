/**
 * HTML to something a model reads well: markdown (node-html-markdown) or
 * plain text. Pure functions, no network.
 */
import { NodeHtmlMarkdown } from "node-html-markdown";

/** Elements that never carry the readable content of a page. */
const DROPPED_ELEMENTS = [
  "head",
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
];

const converter = new NodeHtmlMarkdown({
  ignore: DROPPED_ELEMENTS,
  maxConsecutiveNewlines: 2,
  keepDataImages: false,
});

/** The page title, entities decoded and whitespace collapsed; "" when there is none. */
export function extractTitle(html: string): string {
  const m = /<title\b[^>]*>([\s\S]*?)<\/title\s*>/i.exec(html);
  return m ? collapseSpaces(decodeEntities(stripTags(m[1]!))) : "";
}

/**
 * Readable markdown of a page. When the page marks its main content
 * (`<main>` or a single `<article>`), only that is kept. Relative links and
 * images are made absolute against `baseUrl`, so the model can follow them.
 */
export function htmlToMarkdown(html: string, baseUrl?: string): string {
  const markdown = converter.translate(mainContent(html));
  return baseUrl ? absolutizeLinks(markdown, baseUrl) : markdown.trim();
}

/** Plain text of a page: tags dropped, blocks on their own lines, entities decoded. */
export function htmlToText(html: string): string {
  let s = mainContent(html);
  s = s.replace(/<!--[\s\S]*?-->/g, "");
  for (const tag of DROPPED_ELEMENTS) {
    s = s.replace(new RegExp(`<${tag}\\b[\\s\\S]*?</${tag}\\s*>`, "gi"), " ");
  }
  s = s.replace(/<br\s*\/?>/gi, "\n");
  s = s.replace(/<li\b[^>]*>/gi, "\n- ");
  s = s.replace(
    /<\/?(p|div|section|article|main|header|footer|aside|h[1-6]|ul|ol|table|tr|blockquote|pre|hr|dl|dt|dd|figure|figcaption)\b[^>]*>/gi,
    "\n",
  );
  s = s.replace(/<\/t[dh]\s*>/gi, "\t");
  s = decodeEntities(stripTags(s));
  return s
    .split("\n")
    .map((line) => collapseSpaces(line))
    .join("\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}

/** The `<main>` element, or the only `<article>`, or the whole document. */
function mainContent(html: string): string {
  const main = /<main\b[^>]*>([\s\S]*)<\/main\s*>/i.exec(html);
  if (main && main[1]!.trim()) return main[1]!;
  const articles = html.match(/<article\b/gi);
  if (articles?.length === 1) {
    const article = /<article\b[^>]*>([\s\S]*)<\/article\s*>/i.exec(html);
    if (article && article[1]!.trim()) return article[1]!;
  }
  return html;
}

/** Rewrites `](relative)` targets in markdown to absolute URLs. */
export function absolutizeLinks(markdown: string, baseUrl: string): string {
  return markdown
    .replace(/\]\(([^)\s]+)(\s+"[^"]*")?\)/g, (whole, href: string, title: string | undefined) => {
      if (/^[a-z][a-z0-9+.-]*:/i.test(href) || href.startsWith("#")) return whole;
      try {
        return `](${new URL(href, baseUrl).href}${title ?? ""})`;
      } catch {
        return whole;
      }
    })
    .trim();
}

function stripTags(s: string): string {
  return s.replace(/<[^>]*>/g, "");
}

function collapseSpaces(s: string): string {
  return s.replace(/[ \t\f\v\u00a0]+/g, " ").trim();
}

const NAMED_ENTITIES: Record<string, string> = {
  amp: "&",
  lt: "<",
  gt: ">",
  quot: '"',
  apos: "'",
  nbsp: "\u00a0",
  ndash: "\u2013",
  mdash: "\u2014",
  hellip: "\u2026",
  lsquo: "\u2018",
  rsquo: "\u2019",
  ldquo: "\u201c",
  rdquo: "\u201d",
  laquo: "\u00ab",
  raquo: "\u00bb",
  bull: "\u2022",
  middot: "\u00b7",
  copy: "\u00a9",
  reg: "\u00ae",
  trade: "\u2122",
  deg: "\u00b0",
  euro: "\u20ac",
  pound: "\u00a3",
  times: "\u00d7",
  eacute: "\u00e9",
  egrave: "\u00e8",
  aacute: "\u00e1",
  agrave: "\u00e0",
  ouml: "\u00f6",
  uuml: "\u00fc",
  auml: "\u00e4",
  szlig: "\u00df",
};

/** Numeric entities and the common named ones; unknown ones are left as written. */
export function decodeEntities(s: string): string {
  return s.replace(/&(#x[0-9a-f]+|#\d+|[a-z][a-z0-9]*);/gi, (whole, body: string) => {
    if (body.startsWith("#")) {
      const code =
        body[1] === "x" || body[1] === "X" ? parseInt(body.slice(2), 16) : parseInt(body.slice(1), 10);
      return Number.isFinite(code) && code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    }
    return NAMED_ENTITIES[body] ?? NAMED_ENTITIES[body.toLowerCase()] ?? whole;
  });
}
