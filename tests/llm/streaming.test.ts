/** The provider streams (`stream: true`) through the real openai SDK against FakeOpenAI's SSE. */
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { OpenAIProvider } from "../../src/llm/openai-provider.js";
import { ResilientProvider } from "../../src/llm/resilient.js";
import type { ChatMessage } from "../../src/llm/types.js";
import { userFacingLlmError } from "../../src/llm/user-facing.js";
import { llmFailure as failure } from "../helpers/llm-failure.js";
import { FakeOpenAI, toolCall } from "../fakes/openai-server.js";

let fake: FakeOpenAI;
beforeEach(async () => {
  fake = await FakeOpenAI.start();
});
afterEach(async () => {
  await fake.close();
});

function provider(): OpenAIProvider {
  return new OpenAIProvider({
    name: "testprov",
    apiKey: "sk-test-key-000000000000",
    baseURL: fake.baseURL,
    model: "fake-model",
    maxTokens: 256,
    temperature: 0.2,
    timeoutMs: 10_000,
    maxRetries: 2,
    retryBaseMs: 1,
    retryMaxMs: 10,
    random: () => 0,
    log: pino({ level: "silent" }),
  });
}

const hello: ChatMessage[] = [{ role: "user", content: "hello" }];

describe("streamed answers", () => {
  it("shows the text as it grows, asks for usage, and returns the same answer as a plain call", async () => {
    fake.enqueue({
      content: "Hello there, how are you today?",
      usage: { prompt_tokens: 12, completion_tokens: 7 },
    });
    const seen: string[] = [];
    const res = await provider().chat({ messages: hello, onText: (t) => seen.push(t) });
    expect(fake.lastRequest!.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    expect(seen.length).toBeGreaterThan(3);
    for (let i = 1; i < seen.length; i++) expect(seen[i]!.startsWith(seen[i - 1]!)).toBe(true);
    expect(seen.at(-1)).toBe("Hello there, how are you today?");
    expect(res).toMatchObject({
      content: "Hello there, how are you today?",
      toolCalls: [],
      finishReason: "stop",
      usage: { promptTokens: 12, completionTokens: 7 },
    });
  });

  it("assembles tool calls from their pieces and keeps reasoning_content", async () => {
    fake.enqueue({
      content: "Let me look.",
      reasoning: "the user wants a file",
      toolCalls: [
        toolCall("read_file", { path: "notes/today.md" }, "c1"),
        toolCall("list_dir", { path: "." }, "c2"),
      ],
    });
    const res = await provider().chat({ messages: hello, onText: () => undefined });
    expect(res.toolCalls).toEqual([
      {
        id: "c1",
        name: "read_file",
        arguments: { path: "notes/today.md" },
        rawArguments: '{"path":"notes/today.md"}',
      },
      { id: "c2", name: "list_dir", arguments: { path: "." }, rawArguments: '{"path":"."}' },
    ]);
    expect(res.reasoning).toBe("the user wants a file");
    expect(res.finishReason).toBe("tool_calls");
  });

  it("a <think> block split across chunks is never shown, and is kept as reasoning", async () => {
    fake.enqueue({ content: "<think>private musing</think>Public answer.", pieceChars: 3 });
    const seen: string[] = [];
    const res = await provider().chat({ messages: hello, onText: (t) => seen.push(t) });
    expect(seen.join("\n")).not.toMatch(/think|musing|</);
    expect(res.content).toBe("Public answer.");
    expect(res.reasoning).toBe("private musing");
  });

  it("a model that refuses streaming answers in one piece, and is not asked to stream again", async () => {
    fake.refuseParams({ model: /^fake-model$/, param: "stream" });
    const p = provider();
    const seen: string[] = [];
    expect((await p.chat({ messages: hello, onText: (t) => seen.push(t) })).content).toBe("ok");
    expect((await p.chat({ messages: hello, onText: (t) => seen.push(t) })).content).toBe("ok");
    expect(seen).toEqual([]);
    const bodies = fake.requests.map((r) => r.body);
    expect(bodies).toHaveLength(3); // refused once, then two plain calls
    expect(bodies[1]).not.toHaveProperty("stream");
    expect(bodies[1]).not.toHaveProperty("stream_options");
    expect(bodies[2]).not.toHaveProperty("stream");
  });

  it("a stream that breaks before any text is shown is retried", async () => {
    fake.enqueue({ content: "first try", breakAfterPieces: 0 }, { content: "second try" });
    const seen: string[] = [];
    const res = await provider().chat({ messages: hello, onText: (t) => seen.push(t) });
    expect(res.content).toBe("second try");
    expect(fake.requests).toHaveLength(2);
  });

  it("a stream that breaks after text was shown is not retried: the partial text is kept with a note", async () => {
    fake.enqueue(
      { content: "The first part of a long answer", breakAfterPieces: 3 },
      { content: "never asked" },
    );
    const seen: string[] = [];
    const err = await failure(provider().chat({ messages: hello, onText: (t) => seen.push(t) }));
    expect(fake.requests).toHaveLength(1);
    expect(err.retryable).toBe(false);
    expect(err.partialText).toBe("The first part");
    expect(seen.at(-1)?.trimEnd()).toBe("The first part");
    expect(userFacingLlmError(err)).toMatch(/^The first part\n\n\(The answer broke off here: .*\)$/);
  });

  it("a fallback model is not tried once part of the answer was shown", async () => {
    fake.enqueue(
      { content: "The first part of a long answer", breakAfterPieces: 2 },
      { content: "from the fallback" },
    );
    const resilient = new ResilientProvider(provider(), {
      models: ["fake-model", "fallback-model"],
      breaker: { threshold: 5, cooldownMs: 60_000 },
      log: pino({ level: "silent" }),
    });
    const err = await failure(resilient.chat({ messages: hello, onText: () => undefined }));
    expect(err.partialText).toBe("The first");
    expect(fake.requests).toHaveLength(1);
  });

  it("without onText nothing streams", async () => {
    fake.enqueue({ content: "plain" });
    await provider().chat({ messages: hello });
    expect(fake.lastRequest!.body).not.toHaveProperty("stream");
  });
});
