import { describe, expect, it } from "vitest";
import { ThinkFilter } from "../../src/llm/think-stream.js";
import { stripThink } from "../../src/llm/think.js";

/** Feeds `text` in pieces of `size` and returns every visible text the preview would show. */
function previews(text: string, size: number): string[] {
  const filter = new ThinkFilter();
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(filter.push(text.slice(i, i + size)));
  return out;
}

describe("ThinkFilter (think blocks removed from a streamed answer)", () => {
  const answer = "<think>let me weigh this</think>The answer is 42.";

  it.each([1, 2, 3, 5, 7, 100])("never shows a think block, whatever the chunk size (%i)", (size) => {
    const shown = previews(answer, size);
    for (const text of shown) expect(text).not.toMatch(/think|weigh|</);
    expect(shown.at(-1)).toBe("The answer is 42.");
  });

  it("holds back a tail that may become a tag, and lets it go once it is not one", () => {
    const filter = new ThinkFilter();
    expect(filter.push("a <th")).toBe("a ");
    expect(filter.push("ree")).toBe("a <three");
  });

  it("treats tags case-insensitively and blocks in the middle of the text", () => {
    expect(previews("Hi <THINK>secret</Think> there", 4).at(-1)).toBe("Hi  there");
  });

  it("a close tag with no open tag takes back what was shown (the template opened the block)", () => {
    const filter = new ThinkFilter();
    expect(filter.push("reasoning first")).toBe("reasoning first");
    expect(filter.push("</think>Answer")).toBe("Answer");
  });

  it("an unclosed block hides the rest", () => {
    expect(previews("Sure. <think>still thinking about", 3).at(-1)).toBe("Sure. ");
  });

  it("agrees with stripThink on the final text", () => {
    for (const text of [answer, "plain", "x<think>a</think>y<think>b</think>z"]) {
      expect(previews(text, 3).at(-1)!.trim()).toBe(stripThink(text).text);
    }
  });
});
