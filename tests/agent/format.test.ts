import { describe, expect, it } from "vitest";
import { contentForSession, formatToolHint, truncateToolResult } from "../../src/agent/format.js";

describe("agent text helpers", () => {
  it("formats a tool hint from the first argument, shortened", () => {
    const call = (args: Record<string, unknown>) => ({
      id: "1",
      name: "read_file",
      arguments: args,
      rawArguments: "",
    });
    expect(formatToolHint(call({ path: "notes.md" }))).toBe('read_file("notes.md")');
    expect(formatToolHint(call({}))).toBe("read_file()");
    expect(formatToolHint(call({ path: "x".repeat(100) }))).toBe(`read_file("${"x".repeat(40)}…")`);
  });

  it("truncates long tool results keeping head and tail with a visible notice", () => {
    const text = `HEAD${"m".repeat(10_000)}TAIL`;
    const out = truncateToolResult(text, 1000);
    expect(out.startsWith("HEAD")).toBe(true);
    expect(out.endsWith("TAIL")).toBe(true);
    expect(out).toMatch(/truncated: \d+ of 10008 characters omitted/);
    expect(out.length).toBeLessThan(1100);
    expect(truncateToolResult("short", 1000)).toBe("short");
  });

  it("stores base64 images as [image] in the session", () => {
    const content = [
      { type: "text" as const, text: "look" },
      { type: "image_url" as const, image_url: { url: "data:image/png;base64,AAAA" } },
    ];
    expect(contentForSession(content)).toEqual([
      { type: "text", text: "look" },
      { type: "text", text: "[image]" },
    ]);
    expect(contentForSession("plain")).toBe("plain");
  });
});
