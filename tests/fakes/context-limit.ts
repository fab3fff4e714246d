/**
 * The context limit of FakeOpenAI: counts a request's prompt tokens with the
 * o200k tokenizer (the way src/agent/budget/tokens.ts counts for gpt-4o
 * models: per message 4 + content + tool calls, plus the tool definitions)
 * and builds the 400 a real provider sends when it is over the limit.
 */
import type { FakeChatBody } from "./openai-server.js";

/** Whose error body to send: their real wording and shape. */
export type OverflowShape = "openai" | "openrouter" | "vllm" | "ollama" | "anthropic";

export interface ContextLimitOptions {
  /** Prompts over this many tokens are refused. */
  maxTokens: number;
  shape?: OverflowShape;
}

type CountText = (text: string) => number;

export class ContextLimit {
  private readonly cache = new Map<string, number>();

  private constructor(
    readonly maxTokens: number,
    private readonly shape: OverflowShape,
    private readonly countText: CountText,
  ) {}

  static async create(opts: ContextLimitOptions): Promise<ContextLimit> {
    const { countTokens } = await import("gpt-tokenizer/encoding/o200k_base");
    const plain = { disallowedSpecial: new Set<string>() };
    return new ContextLimit(opts.maxTokens, opts.shape ?? "openai", (t) => countTokens(t, plain));
  }

  count(body: FakeChatBody): number {
    let n = body.tools?.length ? this.text(JSON.stringify(body.tools)) : 0;
    for (const m of body.messages) {
      n += 4 + (m.name ? 1 : 0);
      if (typeof m.content === "string") n += this.text(m.content);
      else if (Array.isArray(m.content)) {
        for (const part of m.content as { type: string; text?: string }[])
          n += part.type === "text" ? this.text(part.text ?? "") : 1000;
      }
      for (const call of m.tool_calls ?? [])
        n += 4 + this.text(call.function.name) + this.text(call.function.arguments);
    }
    return n;
  }

  /** The status and body a provider of this shape answers for a prompt of `tokens`. */
  refusal(tokens: number): { status: number; body: unknown } {
    const max = this.maxTokens;
    switch (this.shape) {
      case "openai":
        return {
          status: 400,
          body: {
            error: {
              message:
                `This model's maximum context length is ${max} tokens. However, your messages resulted in ` +
                `${tokens} tokens. Please reduce the length of the messages.`,
              type: "invalid_request_error",
              param: "messages",
              code: "context_length_exceeded",
            },
          },
        };
      case "openrouter":
        return {
          status: 400,
          body: {
            error: {
              message:
                `This endpoint's maximum context length is ${max} tokens. However, you requested about ` +
                `${tokens} tokens (${tokens} of text input). Please reduce the length of either one, or use ` +
                `the "middle-out" transform to compress your prompt automatically.`,
              code: 400,
              metadata: { provider_name: null },
            },
          },
        };
      case "vllm":
        // vLLM's current shape (the error nested like OpenAI's; the old top-level one reaches the SDK as "no body").
        return {
          status: 400,
          body: {
            error: {
              message:
                `This model's maximum context length is ${max} tokens. However, your request has ${tokens} ` +
                `input tokens. Please reduce the length of the input messages.`,
              type: "BadRequestError",
              param: null,
              code: 400,
            },
          },
        };
      case "ollama":
        return {
          status: 400,
          body: { error: `prompt too long; exceeded max context length by ${tokens - max} tokens` },
        };
      case "anthropic":
        return {
          status: 400,
          body: {
            type: "error",
            error: {
              type: "invalid_request_error",
              message: `prompt is too long: ${tokens} tokens > ${max} maximum`,
            },
          },
        };
    }
  }

  private text(text: string): number {
    if (text.length < 64) return this.countText(text);
    let n = this.cache.get(text);
    if (n === undefined) {
      n = this.countText(text);
      this.cache.set(text, n);
    }
    return n;
  }
}
