import { describe, expect, it } from "vitest";
import {
  DISCORD_MAX_CHARS,
  discordChunks,
  fileBatches,
  outgoingMessages,
  toDiscordMarkdown,
} from "../../../src/channels/discord/format.js";
import { openFence } from "../../../src/channels/text.js";

/** A reply of about 4,500 characters: prose, a long code block in the middle, more prose. */
function longReplyWithCode(): string {
  const prose = (n: number) =>
    Array.from({ length: n }, (_, i) => `Paragraph ${i}: ${"lorem ipsum dolor sit amet ".repeat(4)}`).join(
      "\n\n",
    );
  const code = Array.from({ length: 60 }, (_, i) => `  const value${i} = compute(${i}); // step ${i}`).join(
    "\n",
  );
  return `${prose(9)}\n\n\`\`\`ts\n${code}\n\`\`\`\n\n${prose(7)}`;
}

describe("toDiscordMarkdown", () => {
  it("passes ordinary Markdown through unchanged", () => {
    const md = "# Title\n\n**bold** _it_ `code` [link](https://example.org)\n\n- a\n- b\n\n> quote";
    expect(toDiscordMarkdown(md)).toBe(md);
  });

  it("turns headings Discord does not render into bold lines", () => {
    expect(toDiscordMarkdown("#### Deep\ntext\n###### Deeper ##")).toBe("**Deep**\ntext\n**Deeper**");
  });

  it("puts tables in a code block so the columns line up", () => {
    const md = "Before\n| a | b |\n|---|:-:|\n| 1 | 2 |\nAfter";
    expect(toDiscordMarkdown(md)).toBe("Before\n```\n| a | b |\n|---|:-:|\n| 1 | 2 |\n```\nAfter");
  });

  it("leaves code blocks alone", () => {
    const md = "```md\n#### not a heading\n| a | b |\n|---|---|\n```";
    expect(toDiscordMarkdown(md)).toBe(md);
  });
});

describe("discordChunks", () => {
  it("keeps a short reply in one message and drops an empty one", () => {
    expect(discordChunks("hi")).toEqual(["hi"]);
    expect(discordChunks("  \n ")).toEqual([]);
  });

  it("splits a 4,500-character reply with a code block into valid messages of at most 2000 characters", () => {
    const text = longReplyWithCode();
    expect(text.length).toBeGreaterThan(4400);
    expect(text.length).toBeLessThan(4700);
    const chunks = discordChunks(text);
    expect(chunks.length).toBe(3);
    for (const chunk of chunks) {
      expect(chunk.length).toBeLessThanOrEqual(DISCORD_MAX_CHARS);
      // Every chunk is valid Markdown on its own: no code block left open.
      expect(openFence(chunk)).toBeNull();
    }
    // The code block was cut: closed at the end of one chunk and reopened with its language in the next.
    const cut = chunks.findIndex((c) => c.endsWith("\n```") && c.includes("```ts"));
    expect(cut).toBeGreaterThanOrEqual(0);
    expect(chunks[cut + 1]!.startsWith("```ts\n")).toBe(true);
    // Nothing lost: every line of the reply is in some chunk, in order.
    const joined = chunks.join("\n");
    let at = 0;
    // (Chunks are trimmed at the cut, so trailing spaces do not count.)
    for (const line of text
      .split("\n")
      .map((l) => l.trimEnd())
      .filter((l) => l !== "")) {
      const found = joined.indexOf(line, at);
      expect(found, line).toBeGreaterThanOrEqual(0);
      at = found + line.length;
    }
  });
});

describe("outgoingMessages", () => {
  it("attaches files to the last text message, at most 10 per message", () => {
    const files = Array.from({ length: 12 }, (_, i) => `/f/${i}.png`);
    expect(outgoingMessages(["one", "two"], files)).toEqual([
      { content: "one" },
      { content: "two", files: files.slice(0, 10) },
      { files: files.slice(10) },
    ]);
    expect(outgoingMessages([], ["/f/a.txt"])).toEqual([{ files: ["/f/a.txt"] }]);
    expect(outgoingMessages(["only text"], [])).toEqual([{ content: "only text" }]);
    expect(fileBatches([1, 2, 3], 2)).toEqual([[1, 2], [3]]);
  });
});
