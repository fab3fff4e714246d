import { describe, expect, it } from "vitest";
import {
  absolutizeLinks,
  decodeEntities,
  extractTitle,
  htmlToMarkdown,
  htmlToText,
} from "../../../src/agent/tools/html.js";

const PAGE = `<!doctype html>
<html><head><title> Tea &amp; Biscuits </title><style>body{color:red}</style>
<script>var secret = "script-text";</script></head>
<body>
<nav><a href="/">Home</a> | <a href="/about">About-nav</a></nav>
<h1>Making tea</h1>
<p>Boil <b>fresh</b> water &mdash; see <a href="/guide?x=1">the guide</a> or <a href="https://ex.org/a">this</a>.</p>
<noscript>enable js</noscript>
<ul><li>Warm the pot</li><li>Add leaves</li></ul>
</body></html>`;

describe("html conversion", () => {
  it("extracts the title", () => {
    expect(extractTitle(PAGE)).toBe("Tea & Biscuits");
    expect(extractTitle("<p>no title</p>")).toBe("");
  });

  it("turns a page into markdown without scripts, styles, nav or noscript, with absolute links", () => {
    const md = htmlToMarkdown(PAGE, "https://tea.example/docs/page");
    expect(md).toContain("# Making tea");
    expect(md).toContain("**fresh**");
    expect(md).toContain("[the guide](https://tea.example/guide?x=1)");
    expect(md).toContain("[this](https://ex.org/a)");
    expect(md).toMatch(/\* Warm the pot\n\* Add leaves/);
    for (const gone of ["script-text", "color:red", "About-nav", "enable js", "Tea & Biscuits"]) {
      expect(md).not.toContain(gone);
    }
  });

  it("prefers <main> when the page has one", () => {
    const md = htmlToMarkdown("<body><div>sidebar junk</div><main><p>the story</p></main></body>");
    expect(md).toBe("the story");
  });

  it("turns a page into plain text", () => {
    const text = htmlToText(PAGE);
    expect(text).toContain("Making tea");
    expect(text).toContain("Boil fresh water \u2014 see the guide or this.");
    expect(text).toContain("- Warm the pot\n- Add leaves");
    expect(text).not.toMatch(/<|script-text|About-nav|enable js|\*\*/);
  });

  it("decodes entities and leaves unknown ones alone", () => {
    expect(decodeEntities("&lt;a&gt; &#39;x&#x27; &eacute; &bogus; &amp;amp;")).toBe(
      "<a> 'x' \u00e9 &bogus; &amp;",
    );
  });

  it("absolutizeLinks keeps anchors and absolute URLs", () => {
    expect(absolutizeLinks("[a](#top) [b](mailto:x@y) [c](../up)", "https://h.example/a/b/c")).toBe(
      "[a](#top) [b](mailto:x@y) [c](https://h.example/a/up)",
    );
  });
});
