/** The provider-neutral chat shapes (OpenAI chat-completions semantics). */

export type Role = "system" | "user" | "assistant" | "tool";

export interface TextPart {
  type: "text";
  text: string;
}
export interface ImagePart {
  type: "image_url";
  image_url: { url: string };
}
export type ContentPart = TextPart | ImagePart;

export interface ToolCall {
  id: string;
  name: string;
  /** Parsed arguments; `{}` when they could not be parsed (see argumentsError). */
  arguments: Record<string, unknown>;
  /** The raw JSON text the model produced. */
  rawArguments: string;
  /** Set when rawArguments is not a JSON object: the tool is not run, the model gets this text. */
  argumentsError?: string;
}

export interface ChatMessage {
  role: Role;
  content: string | ContentPart[] | null;
  /** Assistant messages: the tool calls it made. */
  tool_calls?: { id: string; type: "function"; function: { name: string; arguments: string } }[];
  /** Tool messages: which call this answers. */
  tool_call_id?: string;
  /** Tool messages: the tool's name (nanobot stores it). */
  name?: string;
  /** Assistant messages: reasoning text when the API returned it. */
  reasoning_content?: string;
  /** ISO time, kept in the session file, stripped before sending. */
  timestamp?: string;
  /** Tool names used in the turn (nanobot keeps this on assistant messages). */
  tools_used?: string[];
  /** Assistant messages: the tokens and cost of the LLM call that wrote it (never sent). */
  usage?: MessageUsage;
}

export interface ToolDefinition {
  type: "function";
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

export interface ChatRequest {
  messages: ChatMessage[];
  tools?: readonly ToolDefinition[];
  model?: string;
  maxTokens?: number;
  temperature?: number;
  /**
   * Asks for a streamed answer: called with the visible text so far (think blocks removed) each
   * time it grows. A model that refuses streaming answers in one piece and this is never called.
   */
  onText?: (textSoFar: string) => void;
}

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  /** Of promptTokens, served from the provider's prompt cache (`prompt_tokens_details.cached_tokens`). */
  cachedTokens?: number;
  /** Of completionTokens, spent on reasoning (`completion_tokens_details.reasoning_tokens`). */
  reasoningTokens?: number;
  /** The provider reported no usage: palaver estimated the counts (usage/metered.ts). */
  estimated?: boolean;
  /** USD from `pricing`; null: the model has no price. Set by usage/metered.ts. */
  costUsd?: number | null;
}

/** An assistant message's `usage` in the session file (nanobot ignores the key): its LLM call. */
export interface MessageUsage extends Usage {
  model?: string;
}

export interface ChatResponse {
  /** Text for the user, with <think>…</think> removed. Null when the model only called tools. */
  content: string | null;
  toolCalls: ToolCall[];
  /** Reasoning the API returned (reasoning_content) or that was inside <think> tags. */
  reasoning?: string;
  finishReason: string;
  usage?: Usage;
  model?: string;
}

export interface Provider {
  /** Tool calls parsed; retries and timeouts handled inside. Throws LlmError. */
  chat(req: ChatRequest, signal?: AbortSignal): Promise<ChatResponse>;
  /** The default model of this provider. */
  readonly model: string;
}
