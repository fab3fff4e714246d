/**
 * palaver's messages in the chat-completions wire shape, and a completion (plain, or put back
 * together from a stream by StreamAssembler) back as a ChatResponse. Pure.
 */
import type {
  ChatCompletionContentPartText,
  ChatCompletionMessageParam,
} from "openai/resources/chat/completions";
import * as z from "zod";
import { LlmError, errorMessage } from "../util/errors.js";
import { explainCutOffArguments } from "./cut-off.js";
import { stripThink } from "./think.js";
import type { ChatMessage, ChatResponse, ContentPart, ToolCall, Usage } from "./types.js";

// ---------------------------------------------------------------- requests

function textOf(content: string | ContentPart[] | null): string {
  if (content === null) return "";
  if (typeof content === "string") return content;
  return content
    .filter((p) => p.type === "text")
    .map((p) => p.text)
    .join("\n");
}

function textParts(content: string | ContentPart[] | null): string | ChatCompletionContentPartText[] {
  if (content === null) return "";
  if (typeof content === "string") return content;
  return content.filter((p): p is ChatCompletionContentPartText => p.type === "text");
}

/**
 * Our message → the wire shape. Private fields (timestamp, tools_used) and
 * reasoning_content are dropped: several APIs reject unknown message keys and
 * DeepSeek refuses reasoning_content sent back to it.
 */
export function toApiMessage(m: ChatMessage): ChatCompletionMessageParam {
  const name = m.name ? { name: m.name } : {};
  switch (m.role) {
    case "system":
      return { role: "system", content: textParts(m.content), ...name };
    case "user":
      return { role: "user", content: m.content ?? "", ...name };
    case "assistant":
      return {
        role: "assistant",
        content: m.content === null ? null : textParts(m.content),
        ...(m.tool_calls?.length ? { tool_calls: m.tool_calls } : {}),
        ...name,
      };
    case "tool":
      // nanobot stores the tool name on tool messages and sends it; Mistral wants it.
      return { role: "tool", content: textOf(m.content), tool_call_id: m.tool_call_id ?? "", ...name };
  }
}

// --------------------------------------------------------------- responses

const WireToolCall = z.object({
  id: z.string().nullish(),
  function: z.object({
    name: z.string(),
    // Some servers (old ollama) send an object instead of a JSON string.
    arguments: z.union([z.string(), z.record(z.string(), z.unknown())]).nullish(),
  }),
});

/** Usage as OpenAI reports it; the details are absent on many compatible servers. */
export const WireUsage = z.object({
  prompt_tokens: z.number().nullish(),
  completion_tokens: z.number().nullish(),
  prompt_tokens_details: z.object({ cached_tokens: z.number().nullish() }).nullish(),
  completion_tokens_details: z.object({ reasoning_tokens: z.number().nullish() }).nullish(),
});

/** Wire usage → ours; the details only when reported. */
function usageOf(usage: z.infer<typeof WireUsage>): Usage {
  const cached = usage.prompt_tokens_details?.cached_tokens;
  const reasoning = usage.completion_tokens_details?.reasoning_tokens;
  return {
    promptTokens: usage.prompt_tokens ?? 0,
    completionTokens: usage.completion_tokens ?? 0,
    ...(typeof cached === "number" ? { cachedTokens: cached } : {}),
    ...(typeof reasoning === "number" ? { reasoningTokens: reasoning } : {}),
  };
}

const WireCompletion = z.object({
  model: z.string().nullish(),
  choices: z
    .array(
      z.object({
        message: z.object({
          content: z.string().nullish(),
          reasoning_content: z.string().nullish(),
          reasoning: z.string().nullish(),
          tool_calls: z.array(WireToolCall).nullish(),
        }),
        finish_reason: z.string().nullish(),
      }),
    )
    .nullish(),
  usage: WireUsage.nullish(),
});

/** Raw arguments → a tool call; never throws (a bad call goes back to the model as text). */
export function parseToolCall(
  raw: { id?: string | null; name: string; arguments?: string | Record<string, unknown> | null },
  index: number,
): ToolCall {
  const id = raw.id || `call_${index}_${Math.random().toString(36).slice(2, 10)}`;
  if (raw.arguments && typeof raw.arguments === "object") {
    return { id, name: raw.name, arguments: raw.arguments, rawArguments: JSON.stringify(raw.arguments) };
  }
  const rawArguments = raw.arguments ?? "";
  // Models calling a tool without parameters often send "" rather than "{}".
  if (rawArguments.trim() === "") return { id, name: raw.name, arguments: {}, rawArguments };
  let parsed: unknown;
  try {
    parsed = JSON.parse(rawArguments);
  } catch (err) {
    return {
      id,
      name: raw.name,
      arguments: {},
      rawArguments,
      argumentsError: `The arguments of ${raw.name} are not valid JSON (${errorMessage(err)}). Send a JSON object.`,
    };
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    const got = parsed === null ? "null" : Array.isArray(parsed) ? "an array" : typeof parsed;
    return {
      id,
      name: raw.name,
      arguments: {},
      rawArguments,
      argumentsError: `The arguments of ${raw.name} must be a JSON object, got ${got}.`,
    };
  }
  return { id, name: raw.name, arguments: parsed as Record<string, unknown>, rawArguments };
}

/** A completion body → ChatResponse; throws a retryable invalid_response LlmError when unusable. */
export function parseCompletion(body: unknown): ChatResponse {
  const parsed = WireCompletion.safeParse(body);
  if (!parsed.success) {
    throw new LlmError(
      `the LLM returned a response that is not a chat completion: ${parsed.error.issues[0]?.message ?? "?"}`,
      "invalid_response",
      true,
      { cause: parsed.error },
    );
  }
  const choice = parsed.data.choices?.[0];
  if (!choice) throw new LlmError("the LLM returned no choices", "invalid_response", true);
  const msg = choice.message;
  const { text, thinking } = stripThink(msg.content ?? "");
  const apiReasoning = msg.reasoning_content || msg.reasoning || "";
  const reasoning = apiReasoning || thinking;
  const usage = parsed.data.usage;
  const finishReason = choice.finish_reason ?? "stop";
  return {
    content: text.trim() === "" ? null : text,
    toolCalls: explainCutOffArguments(
      (msg.tool_calls ?? []).map((tc, i) =>
        parseToolCall({ id: tc.id, name: tc.function.name, arguments: tc.function.arguments }, i),
      ),
      finishReason,
    ),
    ...(reasoning ? { reasoning } : {}),
    finishReason,
    ...(usage ? { usage: usageOf(usage) } : {}),
    ...(parsed.data.model ? { model: parsed.data.model } : {}),
  };
}
