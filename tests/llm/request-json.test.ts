import type { ChatCompletionCreateParams } from "openai/resources/chat/completions";
import { describe, expect, it } from "vitest";
import { RequestJson } from "../../src/llm/request-json.js";

const tool = (name: string) => ({
  type: "function" as const,
  function: { name, description: `does ${name} — with "quotes"\n`, parameters: { type: "object" } },
});

function body(system: string, tools?: ReturnType<typeof tool>[]): ChatCompletionCreateParams {
  return {
    model: "m",
    messages: [
      { role: "system", content: system },
      { role: "user", content: "hi ✓" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c1", type: "function", function: { name: "a", arguments: "{}" } }],
      },
      { role: "tool", content: "done", tool_call_id: "c1" },
    ],
    ...(tools ? { tools: [...tools], tool_choice: "auto" as const } : {}),
    max_tokens: 100,
    temperature: undefined,
    stream: true,
  };
}

describe("RequestJson", () => {
  it("gives the text of the same body, with and without tools", () => {
    const json = new RequestJson();
    const tools = [tool("a"), tool("b")];
    for (const b of [body("be brief", tools), body("be brief"), body("")]) {
      expect(JSON.parse(json.of(b, b.tools ? tools : undefined).toString())).toEqual(
        JSON.parse(JSON.stringify(b)),
      );
    }
  });

  it("follows a new system prompt and a new definitions array", () => {
    const json = new RequestJson();
    const first = [tool("a")];
    const second = [tool("a"), tool("c")];
    const parsed = (b: ChatCompletionCreateParams, tools: typeof first) =>
      JSON.parse(json.of(b, tools).toString()) as { messages: { content: string }[]; tools: unknown[] };

    expect(parsed(body("one", first), first).messages[0]!.content).toBe("one");
    expect(parsed(body("two", first), first).messages[0]!.content).toBe("two");
    expect(parsed(body("two", second), second).tools).toEqual(second);
    expect(parsed(body("one", first), first).tools).toEqual(first);
  });

  it("does not take a named system message for the cached one", () => {
    const json = new RequestJson();
    const plain = body("same");
    const named = body("same");
    named.messages[0] = { role: "system", content: "same", name: "boss" };
    json.of(plain, undefined);
    const sent = JSON.parse(json.of(named, undefined).toString()) as ChatCompletionCreateParams;
    expect(sent.messages[0]).toEqual({
      role: "system",
      content: "same",
      name: "boss",
    });
  });
});
