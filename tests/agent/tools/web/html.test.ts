import { describe, expect, it } from "vitest";
import {
  convertHtml,
  decodeEntities,
  htmlToMarkdown,
  htmlToText,
} from "../../../../src/agent/tools/web/html.js";

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

  it("renders code, emphasis, nested lists, quotes, pre, tables, images and rules", async () => {
    const page = `<h1>T</h1><p>Para with <code>x*y</code> and <em>em</em>, <strong>b</strong>, <del>old</del>.</p>
<ol><li>one<ul><li>inner</li><li>inner2</li></ul></li><li>two</li></ol>
<blockquote><p>quoted</p></blockquote>
<pre><code>line 1
  line 2 *not emphasis*</code></pre>
<table><tr><th>A</th><th>B</th></tr><tr><td>1</td><td>2|3</td></tr></table>
<img src="/i.png" alt="pic"><img src="data:image/png;base64,AAA"><hr><p>a<br>b</p>`;
    expect(await htmlToMarkdown(page, "https://h.example/x/")).toBe(
      [
        "# T",
        "Para with `x*y` and _em_, **b**, ~~old~~.",
        "1. one\n   * inner\n   * inner2\n2. two",
        "> quoted",
        "```\nline 1\n  line 2 *not emphasis*\n```",
        "| A | B |\n| --- | --- |\n| 1 | 2\\|3 |",
        "![pic](https://h.example/i.png)",
        "---",
        "a\nb",
      ].join("\n\n"),
    );
  });

  it("closes what HTML closes implicitly and drops empty emphasis", async () => {
    expect(await htmlToMarkdown("<ul><li>a<li>b</ul><p>one<p>two<b></b><i> </i>")).toBe(
      "* a\n* b\n\none\n\ntwo",
    );
  });

  it("stops at maxChars and says the page was cut", async () => {
    const page = await convertHtml(`<p>${"word ".repeat(1000)}</p><p>more</p>`, {
      mode: "text",
      maxChars: 50,
    });
    expect(page.truncated).toBe(true);
    expect(page.content.startsWith("word word")).toBe(true);
    const whole = await convertHtml("<p>short</p>", { mode: "text", maxChars: 50 });
    expect(whole).toEqual({ title: "", content: "short", truncated: false });
  });

  // Each of these took seconds to minutes with node-html-markdown and the old regexes.
  it.each([
    ["unclosed tags", "<b>".repeat(20_000), ""],
    ["deep nesting past the depth cap", "<div>".repeat(20_000) + "deep" + "</div>".repeat(20_000), "deep"],
    ["an unterminated tag", `<p>kept</p><a href="${"x".repeat(60_000)}`, "kept"],
    ["unterminated comments", "<p>kept</p>" + "<!--".repeat(15_000), "kept"],
    ["a < flood", "<".repeat(60_000), "<".repeat(60_000)],
    ["a script that never ends", "<p>kept</p><script>" + "</".repeat(30_000), "kept"],
  ])("converts 60 KB of %s", async (_shape, html, expected) => {
    expect(await htmlToText(html)).toBe(expected);
    expect(await htmlToMarkdown(html)).toBe(expected);
  });
});
