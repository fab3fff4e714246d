import { describe, expect, it } from "vitest";
import { convertHtml, decodeEntities, htmlToMarkdown, htmlToText } from "../../../src/agent/tools/html.js";

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
  it("extracts the title", async () => {
    expect((await convertHtml(PAGE, { mode: "markdown" })).title).toBe("Tea & Biscuits");
    expect((await convertHtml("<p>no title</p>", { mode: "text" })).title).toBe("");
  });

  it("turns a page into markdown without scripts, styles, nav or noscript, with absolute links", async () => {
    const md = await htmlToMarkdown(PAGE, "https://tea.example/docs/page");
    expect(md).toContain("# Making tea");
    expect(md).toContain("**fresh**");
    expect(md).toContain("[the guide](https://tea.example/guide?x=1)");
    expect(md).toContain("[this](https://ex.org/a)");
    expect(md).toMatch(/\* Warm the pot\n\* Add leaves/);
    for (const gone of ["script-text", "color:red", "About-nav", "enable js", "Tea & Biscuits"]) {
      expect(md).not.toContain(gone);
    }
  });

  it("prefers <main> when the page has one", async () => {
    const md = await htmlToMarkdown("<body><div>sidebar junk</div><main><p>the story</p></main></body>");
    expect(md).toBe("the story");
  });

  it("turns a page into plain text", async () => {
    const text = await htmlToText(PAGE);
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

  it("makes links absolute and keeps anchors, mailto and absolute URLs", async () => {
    const md = await htmlToMarkdown(
      '<p><a href="#top">a</a> <a href="mailto:x@y">b</a> <a href="../up">c</a> <a href="javascript:alert(1)">d</a></p>',
      "https://h.example/a/b/c",
    );
    expect(md).toBe("[a](#top) [b](mailto:x@y) [c](https://h.example/a/up) d");
  });
});
