import OpenAI from "openai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FakeOpenAI, OPENAI_REASONING_REFUSALS, lastUserText, toolCall } from "../fakes/openai-server.js";
import { waitFor } from "../helpers/wait.js";

let fake: FakeOpenAI;
let client: OpenAI;

beforeEach(async () => {
  fake = await FakeOpenAI.start();
  client = new OpenAI({ apiKey: "sk-fake", baseURL: fake.baseURL, maxRetries: 0, timeout: 5000 });
});
afterEach(async () => {
  await fake.close();
});

describe("FakeOpenAI", () => {
  it("refuses max_tokens for a reasoning model and keeps it for others", async () => {
    fake.refuseParams(...OPENAI_REASONING_REFUSALS);
    const sent = { messages: [{ role: "user" as const, content: "hi" }], max_tokens: 10 };
    await expect(client.chat.completions.create({ model: "o3-mini", ...sent })).rejects.toMatchObject({
      status: 400,
      param: "max_tokens",
      code: "unsupported_parameter",
    });
    await expect(client.chat.completions.create({ model: "gpt-4o", ...sent })).resolves.toBeTruthy();
  });

  it("streams content and tool calls as valid SSE through the SDK", async () => {
    fake.enqueue({
      content: "Hello streaming world",
      reasoning: "thinking it over",
      toolCalls: [toolCall("read_file", { path: "a/b.md" }, "call_1"), toolCall("list_dir", { path: "." })],
      usage: { prompt_tokens: 7, completion_tokens: 9 },
    });
    const stream = await client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let content = "";
    let reasoning = "";
    let finish: string | null = null;
    let usage: { prompt_tokens: number; completion_tokens: number } | undefined;
    const calls: { id?: string; name: string; args: string }[] = [];
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices[0];
      if (!choice) continue;
      content += choice.delta.content ?? "";
      const delta = choice.delta as { reasoning_content?: string };
      reasoning += delta.reasoning_content ?? "";
      for (const tc of choice.delta.tool_calls ?? []) {
        const slot = (calls[tc.index] ??= { name: "", args: "" });
        if (tc.id) slot.id = tc.id;
        slot.name += tc.function?.name ?? "";
        slot.args += tc.function?.arguments ?? "";
      }
      finish = choice.finish_reason ?? finish;
    }
    expect(content).toBe("Hello streaming world");
    expect(reasoning).toBe("thinking it over");
    expect(finish).toBe("tool_calls");
    expect(calls).toHaveLength(2);
    expect(calls[0]).toEqual({ id: "call_1", name: "read_file", args: '{"path":"a/b.md"}' });
    expect(JSON.parse(calls[1]!.args)).toEqual({ path: "." });
    expect(usage).toMatchObject({ prompt_tokens: 7, completion_tokens: 9 });
    expect(fake.requests[0]!.body.stream).toBe(true);
  });

  it("the SDK's stream helper accumulates the fake's stream", async () => {
    fake.enqueue({ content: "accumulate me please" });
    const runner = client.chat.completions.stream({ model: "m", messages: [{ role: "user", content: "x" }] });
    const final = await runner.finalChatCompletion();
    expect(final.choices[0]!.message.content).toBe("accumulate me please");
  });

  it("answers ok by default, then the handler, and the queue comes first", async () => {
    const ask = async (text: string) =>
      (await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: text }] }))
        .choices[0]!.message.content;
    expect(await ask("a")).toBe("ok");
    fake.setHandler((req, i) => ({ content: `echo ${lastUserText(req)} #${i}` }));
    fake.enqueue({ content: "queued" });
    expect(await ask("b")).toBe("queued");
    expect(await ask("c")).toBe("echo c #2");
    expect(fake.requests.map((r) => lastUserText(r))).toEqual(["a", "b", "c"]);
    expect(fake.lastRequest?.body.model).toBe("m");
  });

  it("sends OpenAI-style errors with headers", async () => {
    fake.enqueue({ status: 429, headers: { "retry-after": "7" } });
    const err: unknown = await client.chat.completions
      .create({ model: "m", messages: [{ role: "user", content: "x" }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    const e = err as InstanceType<typeof OpenAI.RateLimitError>;
    expect(e.headers.get("retry-after")).toBe("7");
    expect(e.code).toBe("rate_limit_exceeded");
  });

  it("serves GET /v1/models", async () => {
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(["fake-model"]);
    expect(fake.requests).toHaveLength(0);
  });

  it("close() ends promptly even with a delayed response pending", async () => {
    fake.enqueue({ delayMs: 600_000 }); // a close() that waited for it would outlast the test's limit
    const pending = client.chat.completions
      .create({ model: "m", messages: [{ role: "user", content: "x" }] })
      .catch((e: unknown) => e);
    await waitFor(() => fake.requests.length === 1, undefined, "the request at the fake");
    await fake.close();
    expect(await pending).toBeInstanceOf(OpenAI.APIConnectionError);
    // afterEach closes again: close() must be idempotent enough not to hang.
  });
});
