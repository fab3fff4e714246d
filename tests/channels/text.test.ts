import { describe, expect, it } from "vitest";
import { isTableRule, openFence, parseHeading, splitMessage } from "../../src/channels/text.js";

describe("splitMessage", () => {
  it("keeps short text whole", () => {
    expect(splitMessage("hello", 10)).toEqual(["hello"]);
  });

  it("splits at paragraph, then line, then word boundaries, never over the limit", () => {
    const text = `${"a".repeat(30)}\n\n${"b".repeat(30)}\n${"c".repeat(10)} ${"d".repeat(10)}`;
    const chunks = splitMessage(text, 40);
    expect(chunks).toEqual(["a".repeat(30), `${"b".repeat(30)}`, `${"c".repeat(10)} ${"d".repeat(10)}`]);
    for (const c of chunks) expect(c.length).toBeLessThanOrEqual(40);
  });

  it("cuts hard when there is no boundary, without splitting a surrogate pair", () => {
    const chunks = splitMessage("x".repeat(9) + "😀".repeat(5), 10);
    expect(chunks.join("")).toBe("x".repeat(9) + "😀".repeat(5));
    for (const c of chunks) {
      expect(c.length).toBeLessThanOrEqual(10);
      expect(c).not.toMatch(/[\ud800-\udbff]$/);
    }
  });

  it("closes and reopens a code block cut in two, keeping its language", () => {
    const code = Array.from({ length: 40 }, (_, i) => `const v${i} = ${i};`).join("\n");
    const text = `Here is the code:\n\n\`\`\`ts\n${code}\n\`\`\`\n\nDone.`;
    const chunks = splitMessage(text, 200);
    expect(chunks.length).toBeGreaterThan(2);
    for (const c of chunks) {
      expect(c.length).toBeLessThanOrEqual(200);
      expect(openFence(c)).toBeNull(); // every chunk is valid markdown on its own
    }
    expect(chunks[1]!.startsWith("```ts\n")).toBe(true);
    const rejoined = chunks.join("\n").replace(/\n```\n```ts\n/g, "\n");
    for (let i = 0; i < 40; i++) expect(rejoined).toContain(`const v${i} = ${i};`);
    expect(chunks.at(-1)).toMatch(/Done\.$/);
  });
});

describe("splitMessage with hostile input (model output is untrusted)", () => {
  // Regression: a reply of 100,000 "~" reopened its whole first line as the
  // fence of every next chunk, so each chunk moved one character: 98,000
  // chunks and tens of seconds of CPU on the event loop.
  it.each([
    ["~", "~".repeat(100_000)],
    ["```", "`".repeat(100_000)],
    ["a fence with a huge info string", "```" + "x".repeat(100_000)],
  ])("splits 100 KB of %s into full chunks", (_name, text) => {
    const chunks = splitMessage(text, 2000);
    expect(chunks.length).toBeLessThan(100);
    for (const c of chunks) expect(c.length).toBeLessThanOrEqual(2000);
  });

  it("keeps the language of a reopened fence, not the rest of its line", () => {
    const text = "```typescript  trailing words that are not a language\n" + "const x = 1;\n".repeat(50);
    const chunks = splitMessage(text, 200);
    expect(chunks[1]!.startsWith("```typescript\n")).toBe(true);
  });
});

describe("openFence", () => {
  it("finds an unclosed fence", () => {
    expect(openFence("a\n```py\nx = 1")).toBe("```py");
    expect(openFence("a\n```py\nx = 1\n```")).toBeNull();
    expect(openFence("plain")).toBeNull();
  });
});

describe("parseHeading and isTableRule (model output is untrusted)", () => {
  it("parse headings like the markdown renderers", () => {
    expect(parseHeading("## Title ##")).toEqual({ level: 2, text: "Title" });
    expect(parseHeading("   #### a b  ")).toEqual({ level: 4, text: "a b" });
    expect(parseHeading("####### seven")).toBeNull();
    expect(parseHeading("#nospace")).toBeNull();
  });

  it("recognise delimiter rows", () => {
    expect(isTableRule("| --- | :-: |")).toBe(true);
    expect(isTableRule("---|---")).toBe(true);
    expect(isTableRule("| - | - |", 2)).toBe(false);
    expect(isTableRule("| a | b |")).toBe(false);
    expect(isTableRule("     ")).toBe(false);
  });
});
