import { describe, expect, it } from "vitest";
import {
  convertInline,
  escapeMrkdwn,
  formatSlackMessage,
  markdownToMrkdwn,
  SLACK_MESSAGE_LIMIT,
  slackToPlainText,
} from "../../../src/channels/slack/format.js";

describe("markdownToMrkdwn: inline", () => {
  it.each([
    ["**bold**", "*bold*"],
    ["__bold__", "*bold*"],
    ["*italic*", "_italic_"],
    ["_italic_", "_italic_"],
    ["***both***", "*_both_*"],
    ["~~gone~~", "~gone~"],
    ["a **bold** and *italic* word", "a *bold* and _italic_ word"],
    ["**bold with *italic* inside**", "*bold with _italic_ inside*"],
  ])("%s → %s", (md, mrkdwn) => {
    expect(markdownToMrkdwn(md)).toBe(mrkdwn);
  });

  it("leaves what only looks like emphasis alone", () => {
    expect(markdownToMrkdwn("snake_case_name and 2*3*4 and a * b")).toBe(
      "snake_case_name and 2*3*4 and a * b",
    );
    expect(markdownToMrkdwn("file_name.py")).toBe("file_name.py");
  });

  it("keeps code spans literal, escaped, and free of formatting", () => {
    expect(markdownToMrkdwn("run `a < b && **c**` now")).toBe("run `a &lt; b &amp;&amp; **c**` now");
    expect(markdownToMrkdwn("``code with ` tick``")).toBe("`code with ` tick`");
  });

  it("turns links into <url|text> and keeps bare URLs intact", () => {
    expect(markdownToMrkdwn("see [the docs](https://ex.com/a?b=1&c=2)")).toBe(
      "see <https://ex.com/a?b=1&amp;c=2|the docs>",
    );
    expect(markdownToMrkdwn('[t](https://x.io "Title")')).toBe("<https://x.io|t>");
    expect(markdownToMrkdwn("![diagram](https://x.io/d.png)")).toBe("<https://x.io/d.png|diagram>");
    expect(markdownToMrkdwn("<https://auto.link/x>")).toBe("<https://auto.link/x>");
    expect(markdownToMrkdwn("[https://x.io](https://x.io)")).toBe("<https://x.io>");
    // Underscores in a URL are not italics.
    expect(markdownToMrkdwn("go to https://x.io/a_b_c/d?q=1&r=2.")).toBe(
      "go to https://x.io/a_b_c/d?q=1&amp;r=2.",
    );
    expect(markdownToMrkdwn("[**bold** `code`](https://x.io)")).toBe("<https://x.io|*bold* `code`>");
  });

  it("escapes &, < and > everywhere, once", () => {
    expect(markdownToMrkdwn("5 > 3 & 2 < 4 &amp;")).toBe("5 &gt; 3 &amp; 2 &lt; 4 &amp;amp;");
    expect(markdownToMrkdwn("<script>")).toBe("&lt;script&gt;");
    expect(escapeMrkdwn("a<b>&")).toBe("a&lt;b&gt;&amp;");
  });

  it("drops Markdown backslash escapes and does not format the escaped characters", () => {
    expect(markdownToMrkdwn("1\\. not a list, \\_not italic\\_")).toBe("1. not a list, _not italic_");
    expect(convertInline("a \\*b\\* c")).toBe("a *b* c");
  });

  it("ignores private-use characters that could confuse the converter", () => {
    expect(markdownToMrkdwn("a\uE0000\uE001 b")).toBe("a0 b");
  });
});

describe("markdownToMrkdwn: blocks", () => {
  it("turns headings into bold lines", () => {
    expect(markdownToMrkdwn("# Title\n## Sub **bold**\n###### tiny ###")).toBe("*Title*\n*Sub bold*\n*tiny*");
  });

  it("renders bullet, nested, numbered and task lists", () => {
    const md = [
      "- one",
      "  - nested",
      "    - deeper",
      "* star",
      "+ plus",
      "1. first",
      "2) second",
      "- [ ] todo",
      "- [x] done",
    ];
    expect(markdownToMrkdwn(md.join("\n")).split("\n")).toEqual([
      "• one",
      "    ◦ nested",
      "        • deeper",
      "• star",
      "• plus",
      "1. first",
      "2. second",
      "☐ todo",
      "☑ done",
    ]);
  });

  it("keeps quotes (Slack stores > as &gt;, which it shows as a quote) and rules", () => {
    expect(markdownToMrkdwn("> quoted *it*\n---\n***")).toBe("&gt; quoted _it_\n──────────\n──────────");
  });

  it("keeps fenced code literal and escaped, without the language tag", () => {
    const md = "before\n```ts\nif (a < b && c) { x = **y**; }\n```\nafter **b**";
    expect(markdownToMrkdwn(md)).toBe(
      "before\n```\nif (a &lt; b &amp;&amp; c) { x = **y**; }\n```\nafter *b*",
    );
    expect(markdownToMrkdwn("~~~\n# not a heading\n~~~")).toBe("```\n# not a heading\n```");
  });

  it("closes a fence the model left open", () => {
    expect(markdownToMrkdwn("```\ncode <x>")).toBe("```\ncode &lt;x&gt;\n```");
  });

  it("renders a narrow table as aligned columns in a code block", () => {
    const md = "| Name | Qty |\n|------|----:|\n| **apple** | 3 |\n| kiwi & co | `12` |";
    expect(markdownToMrkdwn(md)).toBe(
      ["```", "Name      │ Qty", "──────────┼────", "apple     │ 3", "kiwi &amp; co │ 12", "```"].join("\n"),
    );
  });

  it("renders a wide table as one readable line per row", () => {
    const long = "x".repeat(80);
    const md = `| Key | Description |\n| --- | --- |\n| a | ${long} |\n| b |  |`;
    expect(markdownToMrkdwn(md).split("\n")).toEqual([`• *Key:* a · *Description:* ${long}`, "• *Key:* b"]);
  });

  it("does not take a lone pipe line for a table", () => {
    expect(markdownToMrkdwn("| just text |\nnext")).toBe("| just text |\nnext");
  });

  it("normalizes Windows line ends", () => {
    expect(markdownToMrkdwn("**a**\r\n*b*")).toBe("*a*\n_b_");
  });
});

describe("formatSlackMessage", () => {
  it("returns nothing for an empty or blank reply", () => {
    expect(formatSlackMessage("")).toEqual([]);
    expect(formatSlackMessage("  \n ")).toEqual([]);
  });

  it("splits long replies at line boundaries under the limit, keeping code fences valid", () => {
    const lines = Array.from({ length: 400 }, (_v, i) => `line ${i} with **some** words`);
    const code = ["```python", ...Array.from({ length: 200 }, (_v, i) => `print(${i})  # <${i}>`), "```"];
    const chunks = formatSlackMessage([...lines, ...code].join("\n"));
    expect(chunks.length).toBeGreaterThan(2);
    for (const chunk of chunks) {
      expect(chunk.length).toBeLessThanOrEqual(SLACK_MESSAGE_LIMIT);
      expect(chunk.split("\n").filter((l) => l.startsWith("```")).length % 2).toBe(0);
    }
    const all = chunks.join("\n");
    for (let i = 0; i < 400; i++) expect(all).toContain(`line ${i} with *some* words`);
    expect(all).toContain("print(199)  # &lt;199&gt;");
    // Every chunk ends at the end of a line: no line is cut in two.
    const rejoined = chunks.flatMap((c) => c.split("\n")).filter((l) => l !== "```");
    expect(rejoined.filter((l) => l.startsWith("line ")).length).toBe(400);
  });

  it("keeps a short reply in one message", () => {
    expect(formatSlackMessage("# Hi\n\n**there**")).toEqual(["*Hi*\n\n*there*"]);
  });
});

describe("slackToPlainText", () => {
  it("undoes Slack's markup for the model", () => {
    expect(
      slackToPlainText(
        "hi <@U1> see <https://x.com|the site>, <https://y.com>, <#C1|general> <!here> <!channel> " +
          "<mailto:a@b.c|a@b.c> <!subteam^S1|@devs> &lt;b&gt; &amp;amp;",
      ),
    ).toBe(
      "hi <@U1> see the site (https://x.com), https://y.com, #general @here @channel a@b.c @devs <b> &amp;",
    );
  });
});

// Model output is untrusted (a fetched page can ask the model to repeat anything).
describe("hostile replies", () => {
  it("a line of 20,000 quote markers is one quote (it overflowed the stack: the reply was lost)", () => {
    const out = markdownToMrkdwn(`${"> ".repeat(20_000)}hi`);
    expect(out).toBe("&gt; hi");
  });

  // Regression: the link, autolink, code and emphasis regexes rescanned the rest of
  // the line from every unmatched marker; 40 KB took seconds, 100 KB tens of seconds.
  it.each([
    ["[a](", "[a](".repeat(25_000)],
    ["![", "![".repeat(50_000)],
    ["<http://", "<http://".repeat(12_500)],
    ["backticks", "`".repeat(100_000)],
    ["unclosed bold", "a **".repeat(25_000)],
  ])("formats a 100 KB line of %s quickly, keeping its text", (_name, text) => {
    const started = performance.now();
    const chunks = formatSlackMessage(text);
    // Generous bound for loaded CI machines: before the fix this took 10+ s.
    expect(performance.now() - started).toBeLessThan(2_000);
    const shown = slackToPlainText(chunks.join("")).replace(/\s|`/g, "");
    expect(shown).toBe(text.replace(/\s|`/g, ""));
  });
});
