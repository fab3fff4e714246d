import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { pino } from "pino";
import { ConfigSchema } from "../../src/config/schema.js";
import { OpenAIProvider, createProvider, type OpenAIProviderOptions } from "../../src/llm/openai-provider.js";
import { parseCompletion } from "../../src/llm/wire.js";
import { refusedParam, withoutRefused } from "../../src/llm/param-quirks.js";
import { userFacingLlmError } from "../../src/llm/user-facing.js";
import type { ChatMessage, ToolDefinition } from "../../src/llm/types.js";
import { LlmError } from "../../src/util/errors.js";
import { llmFailure as failure } from "../helpers/llm-failure.js";
import { waitFor } from "../helpers/wait.js";
import { FakeOpenAI, OPENAI_REASONING_REFUSALS, toolCall } from "../fakes/openai-server.js";

let fake: FakeOpenAI;

beforeEach(async () => {
  fake = await FakeOpenAI.start();
});
afterEach(async () => {
  await fake.close();
});

const silent = pino({ level: "silent" });

function provider(over: Partial<OpenAIProviderOptions> = {}): OpenAIProvider {
  return new OpenAIProvider({
    name: "testprov",
    apiKey: "sk-test-key-000000000000",
    baseURL: fake.baseURL,
    model: "fake-model",
    maxTokens: 256,
    temperature: 0.2,
    timeoutMs: 5_000,
    maxRetries: 3,
    retryBaseMs: 1,
    retryMaxMs: 10,
    random: () => 0,
    log: silent,
    ...over,
  });
}

const hello: ChatMessage[] = [
  { role: "system", content: "be brief" },
  { role: "user", content: "hello", timestamp: "2024-01-01T00:00:00Z" },
];

describe("OpenAIProvider against the fake server", () => {
  it("returns a plain reply and sends the request we expect", async () => {
    fake.enqueue({ content: "Hi there!", usage: { prompt_tokens: 12, completion_tokens: 3 } });
    const res = await provider().chat({ messages: hello });
    expect(res).toMatchObject({
      content: "Hi there!",
      toolCalls: [],
      finishReason: "stop",
      usage: { promptTokens: 12, completionTokens: 3 },
      model: "fake-model",
    });
    expect(res.reasoning).toBeUndefined();
    expect(fake.requests).toHaveLength(1);
    const req = fake.requests[0]!;
    expect(req.path).toBe("/v1/chat/completions");
    expect(req.headers.authorization).toBe("Bearer sk-test-key-000000000000");
    expect(req.body).toMatchObject({ model: "fake-model", max_tokens: 256, temperature: 0.2 });
    expect(req.body.tools).toBeUndefined();
    expect(req.body.tool_choice).toBeUndefined();
    expect(req.body.reasoning_effort).toBeUndefined();
    // Private fields never leave the process.
    expect(req.body.messages).toEqual([
      { role: "system", content: "be brief" },
      { role: "user", content: "hello" },
    ]);
  });

  it("strips private fields from history and sends tools with tool_choice auto", async () => {
    const tools: ToolDefinition[] = [
      {
        type: "function",
        function: { name: "read_file", description: "read", parameters: { type: "object", properties: {} } },
      },
    ];
    const history: ChatMessage[] = [
      ...hello,
      {
        role: "assistant",
        content: null,
        reasoning_content: "secret thoughts",
        tools_used: ["read_file"],
        tool_calls: [
          { id: "c1", type: "function", function: { name: "read_file", arguments: '{"path":"a"}' } },
        ],
      },
      { role: "tool", content: "file text", tool_call_id: "c1", name: "read_file", timestamp: "t" },
    ];
    await provider({ reasoningEffort: "high" }).chat({
      messages: history,
      tools,
      maxTokens: 99,
      model: "other",
    });
    const body = fake.requests[0]!.body;
    expect(body.tools).toEqual(tools);
    expect(body.tool_choice).toBe("auto");
    expect(body.max_tokens).toBe(99);
    expect(body.model).toBe("other");
    expect(body.reasoning_effort).toBe("high");
    expect(body.messages[2]).toEqual({
      role: "assistant",
      content: null,
      tool_calls: [
        { id: "c1", type: "function", function: { name: "read_file", arguments: '{"path":"a"}' } },
      ],
    });
    expect(body.messages[3]).toEqual({
      role: "tool",
      content: "file text",
      tool_call_id: "c1",
      name: "read_file",
    });
  });

  it("uses max_completion_tokens and no temperature for OpenAI reasoning models", async () => {
    fake.refuseParams(...OPENAI_REASONING_REFUSALS);
    for (const model of ["o1", "o3-mini", "o4-mini", "gpt-5", "gpt-5-mini"]) {
      const res = await provider({ model, maxRetries: 0 }).chat({ messages: hello });
      expect(res.content).toBe("ok");
      const body = fake.lastRequest!.body;
      expect(body.max_completion_tokens).toBe(256);
      expect(body.max_tokens).toBeUndefined();
      expect(body.temperature).toBeUndefined();
    }
    // One request each: the first body was already right.
    expect(fake.requests).toHaveLength(5);
  });

  it("parses tool calls", async () => {
    fake.enqueue({
      toolCalls: [toolCall("read_file", { path: "notes.md" }, "call_a"), toolCall("list_dir", "")],
    });
    const res = await provider().chat({ messages: hello });
    expect(res.content).toBeNull();
    expect(res.finishReason).toBe("tool_calls");
    expect(res.toolCalls).toHaveLength(2);
    expect(res.toolCalls[0]).toEqual({
      id: "call_a",
      name: "read_file",
      arguments: { path: "notes.md" },
      rawArguments: '{"path":"notes.md"}',
    });
    expect(res.toolCalls[1]).toMatchObject({ name: "list_dir", arguments: {}, rawArguments: "" });
    expect(res.toolCalls[1]!.argumentsError).toBeUndefined();
    expect(res.toolCalls[1]!.id).toBeTruthy();
  });

  it("invalid JSON arguments set argumentsError and never throw", async () => {
    fake.enqueue({
      content: "calling",
      toolCalls: [toolCall("exec", '{"command": "ls'), toolCall("exec", "[1,2]"), toolCall("exec", '"x"')],
    });
    const res = await provider().chat({ messages: hello });
    expect(res.content).toBe("calling");
    const [broken, array, str] = res.toolCalls;
    expect(broken).toMatchObject({ name: "exec", arguments: {}, rawArguments: '{"command": "ls' });
    expect(broken!.argumentsError).toMatch(/not valid JSON/);
    expect(array!.argumentsError).toMatch(/JSON object, got an array/);
    expect(str!.argumentsError).toMatch(/JSON object, got string/);
    expect(fake.requests).toHaveLength(1);
  });

  it("strips <think> blocks and keeps them as reasoning", async () => {
    fake.enqueue({ content: "<think>The user greets me.</think>\n\nHello!" });
    const res = await provider().chat({ messages: hello });
    expect(res.content).toBe("Hello!");
    expect(res.reasoning).toBe("The user greets me.");
  });

  it("prefers the API's reasoning_content", async () => {
    fake.enqueue({ content: "<think>inline</think>Answer", reasoning: "api reasoning" });
    const res = await provider().chat({ messages: hello });
    expect(res.content).toBe("Answer");
    expect(res.reasoning).toBe("api reasoning");
  });

  it("a reply that is only thinking has null content", async () => {
    fake.enqueue({ content: "<think>hmm" });
    const res = await provider().chat({ messages: hello });
    expect(res.content).toBeNull();
    expect(res.reasoning).toBe("hmm");
  });

  it("sends extraHeaders and works without a key", async () => {
    await provider({
      apiKey: "",
      extraHeaders: { "HTTP-Referer": "https://palaver.test", "X-Title": "palaver" },
    }).chat({ messages: hello });
    const h = fake.requests[0]!.headers;
    expect(h["http-referer"]).toBe("https://palaver.test");
    expect(h["x-title"]).toBe("palaver");
    expect(h.authorization).toBe("Bearer no-key");
  });
});

describe("retries", () => {
  it("retries after 429 and honours Retry-After", async () => {
    fake.enqueue({ status: 429, headers: { "retry-after": "0.3" } }, { content: "finally" });
    const t0 = performance.now();
    const res = await provider({ retryMaxMs: 1000 }).chat({ messages: hello });
    const elapsed = performance.now() - t0;
    expect(res.content).toBe("finally");
    expect(fake.requests).toHaveLength(2);
    // Backoff alone would be ~1 ms; the server asked for 300 ms.
    expect(elapsed).toBeGreaterThanOrEqual(280);
  });

  it("honours retry-after-ms too", async () => {
    fake.enqueue({ status: 429, headers: { "retry-after-ms": "200" } }, { content: "ok2" });
    const t0 = performance.now();
    const res = await provider({ retryMaxMs: 1000 }).chat({ messages: hello });
    expect(res.content).toBe("ok2");
    expect(performance.now() - t0).toBeGreaterThanOrEqual(180);
  });

  it("caps an absurd Retry-After at 4x retryMaxMs", async () => {
    fake.enqueue({ status: 429, headers: { "retry-after": "120" } }, { content: "ok3" });
    const t0 = performance.now();
    const res = await provider({ retryMaxMs: 50 }).chat({ messages: hello });
    expect(res.content).toBe("ok3");
    const elapsed = performance.now() - t0;
    expect(elapsed).toBeGreaterThanOrEqual(190);
    expect(elapsed).toBeLessThan(60_000); // far from the 120 s asked for, with room for a loaded machine
  });

  it("retries after a 500 and succeeds", async () => {
    fake.enqueue({ status: 500 }, { status: 503 }, { content: "recovered" });
    const res = await provider().chat({ messages: hello });
    expect(res.content).toBe("recovered");
    expect(fake.requests).toHaveLength(3);
  });

  it("does not retry 401 and says which key to check", async () => {
    fake.setHandler(() => ({ status: 401 }));
    const err = await failure(provider({ name: "openrouter" }).chat({ messages: hello }));
    expect(err).toMatchObject({ kind: "auth", retryable: false, status: 401, attempts: 1 });
    expect(fake.requests).toHaveLength(1);
    const text = userFacingLlmError(err);
    expect(text).toContain("providers.openrouter.apiKey");
    expect(text).not.toContain("sk-test");
  });

  it("takes a proxy's HTML error page as a server error and quotes it", async () => {
    fake.setHandler(() => ({ status: 502, errorBody: "<html><body>502 Bad Gateway (nginx)</body></html>" }));
    const err = await failure(provider({ maxRetries: 0 }).chat({ messages: hello }));
    expect(err).toMatchObject({ kind: "server", retryable: true, status: 502, attempts: 1 });
    expect(err.message).toContain("502 Bad Gateway (nginx)");
  });

  it("does not retry other 4xx and shows the server's reason", async () => {
    fake.enqueue({
      status: 404,
      errorBody: { error: { message: "The model `nope` does not exist", type: "x" } },
    });
    const err = await failure(provider().chat({ messages: hello }));
    expect(err).toMatchObject({ kind: "bad_request", retryable: false, status: 404 });
    expect(fake.requests).toHaveLength(1);
    expect(userFacingLlmError(err)).toContain("The model `nope` does not exist");
  });

  it("a 429 insufficient_quota is an empty account: no retries, and the user is told so", async () => {
    fake.setHandler(() => ({
      status: 429,
      errorBody: {
        error: {
          message: "You exceeded your current quota, please check your plan and billing details.",
          type: "insufficient_quota",
          code: "insufficient_quota",
          param: null,
        },
      },
    }));
    const err = await failure(provider({ name: "openai", maxRetries: 3 }).chat({ messages: hello }));
    expect(err).toMatchObject({ kind: "quota", retryable: false, status: 429, attempts: 1 });
    expect(fake.requests).toHaveLength(1);
    const text = userFacingLlmError(err);
    expect(text).toContain("openai account");
    expect(text).toContain("out of credit");
    expect(text).not.toContain("try again in a minute");
  });

  it("a 402 (DeepSeek's insufficient balance) is an empty account too", async () => {
    fake.setHandler(() => ({ status: 402, errorBody: { error: { message: "Insufficient Balance" } } }));
    const err = await failure(provider({ maxRetries: 3 }).chat({ messages: hello }));
    expect(err).toMatchObject({ kind: "quota", retryable: false, attempts: 1 });
    expect(fake.requests).toHaveLength(1);
  });

  it("gives up after maxRetries with a retryable LlmError of the right kind", async () => {
    fake.setHandler(() => ({ status: 429 }));
    const err = await failure(provider({ maxRetries: 3 }).chat({ messages: hello }));
    expect(err).toBeInstanceOf(LlmError);
    expect(err).toMatchObject({ kind: "rate_limit", retryable: true, status: 429, attempts: 4 });
    expect(fake.requests).toHaveLength(4);
    expect(userFacingLlmError(err)).toBe(
      `Sorry — I couldn't reach the language model: provider testprov (${fake.baseURL}) is rate limiting ` +
        "(HTTP 429) (4 attempts). Please try again in a minute.",
    );
  });

  it("maxRetries 0 means exactly one attempt", async () => {
    fake.setHandler(() => ({ status: 502 }));
    const err = await failure(provider({ maxRetries: 0 }).chat({ messages: hello }));
    expect(err).toMatchObject({ kind: "server", retryable: true, attempts: 1 });
    expect(fake.requests).toHaveLength(1);
  });

  it("retries a dropped connection as a network error", async () => {
    fake.enqueue({ dropConnection: true }, { content: "back" });
    const res = await provider().chat({ messages: hello });
    expect(res.content).toBe("back");
    expect(fake.requests).toHaveLength(2);

    fake.setHandler(() => ({ dropConnection: true }));
    const err = await failure(provider({ maxRetries: 1 }).chat({ messages: hello }));
    expect(err).toMatchObject({ kind: "network", retryable: true, attempts: 2 });
    expect(fake.requests).toHaveLength(4);
  });

  it("retries an unreadable response (empty choices) as invalid_response", async () => {
    fake.enqueue({ rawBody: { id: "x", choices: [] } }, { rawBody: "not json at all" }, { content: "good" });
    const res = await provider().chat({ messages: hello });
    expect(res.content).toBe("good");
    expect(fake.requests).toHaveLength(3);

    fake.setHandler(() => ({ rawBody: { choices: [] } }));
    const err = await failure(provider({ maxRetries: 1 }).chat({ messages: hello }));
    expect(err).toMatchObject({ kind: "invalid_response", retryable: true, attempts: 2 });
  });

  it("times out a slow attempt with kind timeout", async () => {
    // Without the timeout the answer would come, after 10 s: kind timeout proves it fired.
    fake.setHandler(() => ({ delayMs: 10_000, content: "too late" }));
    const err = await failure(provider({ timeoutMs: 150, maxRetries: 1 }).chat({ messages: hello }));
    expect(err).toMatchObject({ kind: "timeout", retryable: true, attempts: 2 });
    expect(fake.requests).toHaveLength(2);
    expect(userFacingLlmError(err)).toContain("did not answer in time");
  });

  it("times out a streamed answer that stalls after its headers, the body included", async () => {
    // The reply starts at once, then its first piece would come after 10 s: only the attempt's
    // deadline can end it (the SDK's own timeout stops counting when the headers are in).
    fake.setHandler(() => ({ content: "late words", pieceDelayMs: 10_000 }));
    const err = await failure(
      provider({ timeoutMs: 200, maxRetries: 0 }).chat({ messages: hello, onText: () => undefined }),
    );
    expect(err).toMatchObject({ kind: "timeout", retryable: true, attempts: 1 });
    expect(err.partialText).toBeUndefined();
  });

  it("a refused connection is a network error, retried and then reported", async () => {
    const closed = await FakeOpenAI.start();
    const baseURL = closed.baseURL;
    await closed.close(); // nothing listens on its port now
    const err = await failure(provider({ baseURL, maxRetries: 1 }).chat({ messages: hello }));
    expect(err).toMatchObject({ kind: "network", retryable: true, attempts: 2 });
    // The address, what happened and the setting that fixes it; no "try again" for a wrong address.
    const text = userFacingLlmError(err);
    expect(text).toContain(`provider testprov (${baseURL}) refused the connection`);
    expect(text).toContain("providers.testprov.apiBase");
    expect(text).not.toMatch(/try again/i);
  });

  it("a caller abort during a delayed response rejects at once, kind aborted, no retries", async () => {
    fake.setHandler(() => ({ delayMs: 600_000 })); // only the abort can end it
    const ac = new AbortController();
    const p = provider({ maxRetries: 3 }).chat({ messages: hello }, ac.signal);
    setTimeout(() => ac.abort(), 100);
    const err = await failure(p);
    expect(err).toMatchObject({ kind: "aborted", retryable: false });
    // chat() has settled, so its attempts are over: a retry would have been sent (and, held like
    // every response here, kept it from settling) before it rejected. No later moment to wait for.
    expect(fake.requests).toHaveLength(1);
    expect(userFacingLlmError(err)).toBe("Stopped.");
  });

  it("an abort during the backoff sleep stops at once", async () => {
    fake.setHandler(() => ({ status: 500 }));
    const ac = new AbortController();
    // A sleep that ignored the abort would make a second request 20 s later: one request proves it.
    const p = provider({ retryBaseMs: 20_000, retryMaxMs: 20_000 }).chat({ messages: hello }, ac.signal);
    // Abort once the first attempt has failed and the provider is sleeping.
    const poll = setInterval(() => {
      if (fake.requests.length === 1) setTimeout(() => ac.abort(), 50);
      if (fake.requests.length >= 1) clearInterval(poll);
    }, 5);
    const err = await failure(p);
    clearInterval(poll);
    expect(err).toMatchObject({ kind: "aborted", retryable: false });
    expect(fake.requests).toHaveLength(1);
  });

  it("an already aborted signal sends nothing", async () => {
    const ac = new AbortController();
    ac.abort();
    const err = await failure(provider().chat({ messages: hello }, ac.signal));
    expect(err.kind).toBe("aborted");
    expect(fake.requests).toHaveLength(0);
  });
});

describe("parameters a model refuses", () => {
  it("a 400 'Unsupported parameter: max_tokens' is sent again with max_completion_tokens, and remembered", async () => {
    // A deployment name that does not look like a reasoning model (Azure, a proxy ...).
    fake.refuseParams({ ...OPENAI_REASONING_REFUSALS[0]!, model: /^my-deploy$/ });
    const p = provider({ model: "my-deploy", maxRetries: 0 });
    expect((await p.chat({ messages: hello })).content).toBe("ok");
    expect(fake.requests.map((r) => [r.body.max_tokens, r.body.max_completion_tokens])).toEqual([
      [256, undefined],
      [undefined, 256],
    ]);
    // The next call goes right the first time.
    await p.chat({ messages: hello });
    expect(fake.requests).toHaveLength(3);
    expect(fake.lastRequest!.body.max_completion_tokens).toBe(256);
    // Only for that model.
    await p.chat({ messages: hello, model: "other" });
    expect(fake.lastRequest!.body.max_tokens).toBe(256);
  });

  it("'temperature is not supported' is sent again without temperature", async () => {
    fake.refuseParams({
      model: /./,
      param: "temperature",
      message: "temperature is not supported with this model",
    });
    const res = await provider({ maxRetries: 0 }).chat({ messages: hello });
    expect(res.content).toBe("ok");
    expect(fake.requests).toHaveLength(2);
    expect(fake.requests[0]!.body.temperature).toBe(0.2);
    expect(fake.requests[1]!.body).not.toHaveProperty("temperature");
    expect(fake.requests[1]!.body.max_tokens).toBe(256);
  });

  it("is retried once: the same refusal again is the user's error, not a loop", async () => {
    fake.refuseParams({ model: /./, param: "temperature", present: () => true });
    const err = await failure(provider({ maxRetries: 3 }).chat({ messages: hello }));
    expect(err).toMatchObject({ kind: "bad_request", status: 400, attempts: 2 });
    expect(fake.requests).toHaveLength(2);
  });

  it("a model that wants roles to alternate gets the runtime context merged into the user message", async () => {
    fake.refuseParams({
      model: /./,
      param: "messages",
      message: "Conversation roles must alternate user/assistant/user/assistant/...",
      present: (body) =>
        body.messages.some((m, i) => m.role === "user" && body.messages[i - 1]?.role === "user"),
    });
    const p = provider({ maxRetries: 0 });
    const withContext: ChatMessage[] = [
      { role: "system", content: "be brief" },
      { role: "user", content: "[Runtime context] channel: cli" },
      { role: "user", content: [{ type: "text", text: "hello" }] },
    ];
    expect((await p.chat({ messages: withContext })).content).toBe("ok");
    expect(fake.requests).toHaveLength(2);
    const merged = [
      { role: "system", content: "be brief" },
      {
        role: "user",
        content: [
          { type: "text", text: "[Runtime context] channel: cli" },
          { type: "text", text: "hello" },
        ],
      },
    ];
    expect(fake.requests[1]!.body.messages).toEqual(merged);
    await p.chat({ messages: withContext });
    expect(fake.requests).toHaveLength(3);
    expect(fake.lastRequest!.body.messages).toEqual(merged);
  });

  it("a 400 for another reason is not retried", async () => {
    fake.enqueue({
      status: 400,
      errorBody: { error: { message: "max_tokens is too large: 99999", param: "max_tokens", type: "x" } },
    });
    const err = await failure(provider().chat({ messages: hello }));
    expect(err).toMatchObject({ kind: "bad_request", attempts: 1 });
    expect(fake.requests).toHaveLength(1);
  });
});

describe("refusedParam / withoutRefused", () => {
  const body = {
    model: "m",
    messages: [],
    max_tokens: 10,
    temperature: 0.5,
    stream_options: { include_usage: true },
    tools: [{ type: "function" as const, function: { name: "t", parameters: {}, strict: true } }],
  };

  it.each([
    ["Unrecognized request argument supplied: stream_options", null, "stream_options"],
    [
      "[{'type': 'extra_forbidden', 'loc': ('body', 'stream_options'), 'msg': 'Extra inputs are not permitted'}]",
      null,
      "stream_options",
    ],
    ["Invalid schema: strict is not supported", null, "strict"],
    ["Unsupported parameter", "tools[0].function.strict", "strict"],
    [
      "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
      "max_tokens",
      "max_tokens",
    ],
    ["messages: model is not supported", null, undefined],
    ["Conversation roles must alternate user/assistant/user/assistant/...", null, undefined],
    ["max_tokens is too large", "max_tokens", undefined],
  ])("%s → %s", (message, param, expected) => {
    expect(refusedParam(body, { message, param })).toBe(expected);
  });

  it("joins consecutive plain-text user messages with a blank line, leaving other roles alone", () => {
    const messages = [
      { role: "user" as const, content: "a" },
      { role: "user" as const, content: "b" },
      { role: "assistant" as const, content: "c" },
      { role: "user" as const, content: "d" },
    ];
    const out = withoutRefused({ model: "m", messages }, new Set(["consecutive_user_messages"] as const));
    expect(out.messages).toEqual([
      { role: "user", content: "a\n\nb" },
      { role: "assistant", content: "c" },
      { role: "user", content: "d" },
    ]);
  });

  it("drops strict from the tools and swaps the token limit's name", () => {
    const out = withoutRefused(body, new Set(["strict", "max_tokens", "stream_options"] as const));
    expect(out).toEqual({
      model: "m",
      messages: [],
      max_completion_tokens: 10,
      temperature: 0.5,
      tools: [{ type: "function", function: { name: "t", parameters: {} } }],
    });
  });
});

describe("parseCompletion", () => {
  it("accepts arguments sent as an object and a missing id", () => {
    const res = parseCompletion({
      choices: [
        {
          message: { content: "x", tool_calls: [{ function: { name: "f", arguments: { a: 1 } } }] },
          finish_reason: null,
        },
      ],
    });
    expect(res.toolCalls[0]).toMatchObject({ name: "f", arguments: { a: 1 }, rawArguments: '{"a":1}' });
    expect(res.toolCalls[0]!.id).toMatch(/^call_0_/);
    expect(res.finishReason).toBe("stop");
    expect(res.usage).toBeUndefined();
  });

  it("reads a `reasoning` field (OpenRouter style)", () => {
    const res = parseCompletion({
      choices: [{ message: { content: "a", reasoning: "r" }, finish_reason: "stop" }],
    });
    expect(res.reasoning).toBe("r");
  });

  it("throws a retryable invalid_response on a wrong shape", () => {
    expect(() => parseCompletion({ choices: "nope" })).toThrow(LlmError);
    expect(() => parseCompletion({ choices: [] })).toThrow(
      expect.objectContaining({ kind: "invalid_response", retryable: true }),
    );
  });
});

describe("userFacingLlmError", () => {
  it("has a plain fallback for unknown errors", () => {
    expect(userFacingLlmError(new Error("boom at /x/y.ts:12"))).not.toContain("boom");
    expect(userFacingLlmError(new LlmError("x", "network", true))).toBe(
      "Sorry — I couldn't reach the language model: the connection to the language model provider failed. " +
        "Please try again in a moment; if it keeps failing, check the provider's apiBase in the config.",
    );
  });
});

describe("createProvider", () => {
  it("builds a provider from the config and talks to it", async () => {
    const config = ConfigSchema.parse({
      agents: {
        defaults: {
          model: "custom/my-model",
          maxTokens: 77,
          temperature: 0.5,
          llm: { timeout: 5, maxRetries: 1, retryBaseDelay: 0.001, retryMaxDelay: 0.01 },
        },
      },
      providers: { custom: { apiBase: fake.baseURL, extraHeaders: { "X-Test": "yes" } } },
    });
    const p = createProvider(config, silent);
    expect(p.model).toBe("my-model");
    fake.enqueue({ status: 500 }, { content: "configured" });
    const res = await p.chat({ messages: hello });
    expect(res.content).toBe("configured");
    expect(fake.requests).toHaveLength(2);
    expect(fake.requests[1]!.body).toMatchObject({ model: "my-model", max_tokens: 77, temperature: 0.5 });
    expect(fake.requests[1]!.headers["x-test"]).toBe("yes");
  });

  it("keeps maxConcurrentTurns + maxSubagents + 1 connections to the API at most; more calls wait", async () => {
    const config = ConfigSchema.parse({
      agents: { defaults: { model: "custom/m", maxConcurrentTurns: 2, maxSubagents: 1 } },
      providers: { custom: { apiBase: fake.baseURL } },
    });
    let inFlight = 0;
    let most = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    fake.setHandler(async () => {
      most = Math.max(most, ++inFlight);
      await gate;
      inFlight--;
      return { content: "ok" };
    });
    const p = createProvider(config, silent);
    const calls = Array.from({ length: 6 }, () => p.chat({ messages: hello }));
    await waitFor(() => inFlight === 4, 5000, "four calls at the API");
    release();
    expect((await Promise.all(calls)).map((r) => r.content)).toEqual(Array(6).fill("ok"));
    expect(most).toBe(4);
  });
});
