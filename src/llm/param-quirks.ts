/**
 * Request parameters some models refuse. OpenAI's reasoning models are known
 * in advance; any other refusal is read from the 400 that names the
 * parameter, and the request goes again without it (or with its known
 * replacement). Only optional parameters are ever dropped: the model, the
 * messages and the tools themselves are never touched, except that a model
 * that refuses two user messages in a row (the runtime context is one) gets
 * them merged into one.
 */
import type { ChatCompletionCreateParams } from "openai/resources/chat/completions";

type Body = ChatCompletionCreateParams;
type Message = Body["messages"][number];
type UserContent = Extract<Message, { role: "user" }>["content"];

/** The parameters we may drop or swap ("strict" is the flag inside each tool's function). */
const ADJUSTABLE = [
  "max_tokens",
  "max_completion_tokens",
  "temperature",
  "reasoning_effort",
  "tool_choice",
  "parallel_tool_calls",
  "stream_options",
  // Streaming itself: a model that refuses it answers in one piece (no live preview).
  "stream",
  "strict",
  // Not a parameter: two user messages in a row, refused by strict chat templates.
  "consecutive_user_messages",
] as const;
export type AdjustableParam = (typeof ADJUSTABLE)[number];

function isAdjustable(name: string): name is AdjustableParam {
  return (ADJUSTABLE as readonly string[]).includes(name);
}

/** OpenAI's reasoning models reject max_tokens and any temperature but the default. */
function isOpenAIReasoningModel(model: string): boolean {
  return /^(o\d|gpt-5)/i.test(model);
}

/** What a model is known to refuse before it has said so. */
export function knownRefusals(model: string): AdjustableParam[] {
  return isOpenAIReasoningModel(model) ? ["max_tokens", "temperature"] : [];
}

function hasStrictTools(body: Body): boolean {
  return (body.tools ?? []).some((t) => t.type === "function" && t.function.strict !== undefined);
}

function hasConsecutiveUsers(messages: Message[]): boolean {
  return messages.some((m, i) => i > 0 && m.role === "user" && messages[i - 1]!.role === "user");
}

function asParts(content: UserContent): Exclude<UserContent, string> {
  return typeof content === "string" ? [{ type: "text", text: content }] : content;
}

/** Runs of user messages as one message (text joined by a blank line, parts kept in order). */
function mergeConsecutiveUsers(messages: Message[]): Message[] {
  const out: Message[] = [];
  for (const m of messages) {
    const prev = out[out.length - 1];
    if (m.role !== "user" || prev?.role !== "user") {
      out.push(m);
      continue;
    }
    const content =
      typeof prev.content === "string" && typeof m.content === "string"
        ? `${prev.content}\n\n${m.content}`
        : [...asParts(prev.content), ...asParts(m.content)];
    out[out.length - 1] = { role: "user", content };
  }
  return out;
}

function carries(body: Body, param: AdjustableParam): boolean {
  if (param === "strict") return hasStrictTools(body);
  if (param === "consecutive_user_messages") return hasConsecutiveUsers(body.messages);
  return (body as unknown as Record<string, unknown>)[param] !== undefined;
}

/**
 * `body` without the refused parameters. A refused token limit is sent under
 * its other name (max_tokens ⇄ max_completion_tokens) unless both are refused:
 * the limit is the user's setting, dropping it silently would change replies.
 */
export function withoutRefused(body: Body, refused: ReadonlySet<AdjustableParam>): Body {
  if (refused.size === 0) return body;
  const out: Record<string, unknown> = { ...body };
  for (const param of refused) delete out[param];
  // stream_options without stream is itself an error on OpenAI.
  if (refused.has("stream")) delete out.stream_options;
  if (refused.has("consecutive_user_messages")) out.messages = mergeConsecutiveUsers(body.messages);
  const limit = body.max_tokens ?? body.max_completion_tokens;
  if (limit != null) {
    if (refused.has("max_tokens") && !refused.has("max_completion_tokens")) out.max_completion_tokens = limit;
    else if (refused.has("max_completion_tokens") && !refused.has("max_tokens")) out.max_tokens = limit;
  }
  if (refused.has("strict") && body.tools) {
    out.tools = body.tools.map((tool) => {
      if (tool.type !== "function") return tool;
      const { strict: _strict, ...fn } = tool.function;
      return { ...tool, function: fn };
    });
  }
  return out as unknown as Body;
}

/** Wordings of "this parameter is not accepted" across OpenAI, Azure, vLLM (pydantic), Groq, Mistral... */
const REFUSAL =
  /unsupported|not supported|does not support|unrecognized|unknown (parameter|field|argument)|not permitted|not allowed|extra (inputs|fields)/i;

/** "Conversation roles must alternate user/assistant/..." (vLLM/HF templates), Mistral's "Unexpected role". */
const ALTERNATION =
  /roles must alternate|unexpected role 'user' after role 'user'|consecutive user messages/i;

/**
 * The optional parameter a 400 says the model does not accept, when it names
 * one that `body` carries; undefined otherwise (the request is wrong some
 * other way and retrying without a parameter would not help).
 */
export function refusedParam(
  body: Body,
  error: { param?: string | null; message: string },
): AdjustableParam | undefined {
  if (ALTERNATION.test(error.message) && hasConsecutiveUsers(body.messages)) {
    return "consecutive_user_messages";
  }
  if (!REFUSAL.test(error.message)) return undefined;
  // The structured field first (OpenAI sets it), then the names in the text in order.
  // A param may be a path ("tools[0].function.strict"): its names count too.
  const words = (text: string | null | undefined) => text?.match(/[a-z_]+/gi) ?? [];
  const names = [...words(error.param), ...words(error.message)];
  for (const name of names) {
    const param = name.toLowerCase();
    if (isAdjustable(param) && carries(body, param)) return param;
  }
  return undefined;
}
