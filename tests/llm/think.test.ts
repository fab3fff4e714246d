import { describe, expect, it } from "vitest";
import { stripThink } from "../../src/llm/think.js";

describe("stripThink", () => {
  it("leaves content without think tags untouched", () => {
    expect(stripThink("  hello\n")).toEqual({ text: "  hello\n", thinking: "" });
    expect(stripThink("")).toEqual({ text: "", thinking: "" });
  });

  it("removes a leading block and keeps its text", () => {
    expect(stripThink("<think>\nLet me see.\n</think>\n\nThe answer is 4.")).toEqual({
      text: "The answer is 4.",
      thinking: "Let me see.",
    });
  });

  it("removes several blocks anywhere", () => {
    expect(stripThink("<think>a</think>One. <think>b</think>Two.")).toEqual({
      text: "One. Two.",
      thinking: "a\n\nb",
    });
  });

  it("treats an unterminated leading block as all thinking", () => {
    expect(stripThink("  <think>still pondering the")).toEqual({ text: "", thinking: "still pondering the" });
    expect(stripThink("<think>x</think><think>unfinished")).toEqual({
      text: "",
      thinking: "x\n\nunfinished",
    });
  });

  it("handles a close tag without an open tag (template-opened thinking)", () => {
    expect(stripThink("reasoning here</think>\nAnswer")).toEqual({
      text: "Answer",
      thinking: "reasoning here",
    });
  });

  it("keeps an unterminated tag that is not leading as text", () => {
    expect(stripThink("Use the <think> tag like this")).toEqual({
      text: "Use the <think> tag like this",
      thinking: "",
    });
  });

  it("is case-insensitive and ignores empty blocks", () => {
    expect(stripThink("<THINK></THINK>Hi")).toEqual({ text: "Hi", thinking: "" });
  });
});
