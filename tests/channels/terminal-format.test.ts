import { describe, expect, it } from "vitest";
import { renderMarkdown } from "../../src/channels/terminal/format.js";

describe("terminal markdown", () => {
  const md = "# Plan\n- **buy** milk\n- call `mum`\n```\ncode here\n```";
  it("renders plain text readably without colour", () => {
    expect(renderMarkdown(md, { color: false })).toBe("PLAN\n• buy milk\n• call mum\n```\ncode here\n```");
  });
  it("uses ANSI styles with colour and drops fence markers", () => {
    const out = renderMarkdown(md, { color: true });
    expect(out).toContain("\u001b[1mbuy\u001b[0m");
    expect(out).toContain("\u001b[36mmum\u001b[0m");
    expect(out).not.toContain("```");
  });
});

// Regression: the emphasis regexes were quadratic in the line length (40 KB of "*": 8 s).
describe("terminal markdown with hostile input", () => {
  it.each([
    ["*", "*".repeat(100_000)],
    ["[", "[".repeat(100_000)],
    ["a `", "a `".repeat(33_000)],
  ])("renders a 100 KB line of %s quickly and keeps it", (_name, text) => {
    const started = performance.now();
    const out = renderMarkdown(text, { color: true });
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(out).toBe(text);
  });
});
