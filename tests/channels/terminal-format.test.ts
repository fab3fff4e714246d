import { describe, expect, it } from "vitest";
import { renderMarkdown } from "../../src/channels/cli/format.js";

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
