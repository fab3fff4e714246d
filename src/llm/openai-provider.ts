/**
 * The one Provider: any OpenAI-compatible chat-completions endpoint, called through the official
 * `openai` client (`chat.completions.create`, `stream: true` for a streamed answer), one client per
 * provider with its base URL, key and extra headers.
 *
 * The retry decision is palaver's, here in `chat()`, and the client's own retries are off
 * (`maxRetries: 0`): our loop honours Retry-After up to a bound, ends its waits when the caller's
 * AbortSignal fires, resends at once without a parameter the model refused (param-quirks.ts), never
 * retries a streamed answer the user has partly seen, and ends every failure as one classified
 * LlmError that says how many attempts were made. Above it, resilient.ts adds fallback models and
 * circuit breakers (it never retries the same model itself).
 */
import OpenAI, { type ClientOptions } from "openai";
import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from "openai/error";
import type {
  ChatCompletionContentPartText,
  ChatCompletionCreateParams,
  ChatCompletionMessageParam,
} from "openai/resources/chat/completions";
import { Agent, fetch as undiciFetch } from "undici";
import * as z from "zod";
import type { Config } from "../config/schema.js";
import { logger, redactText, registerSecrets, type Logger } from "../log.js";
import { deadlineSignal } from "../util/timeout.js";
import { secondsToTimerMs } from "../util/timers.js";
import { LlmError, errorMessage } from "../util/errors.js";
import { resolveProvider } from "./providers.js";
import { backoffDelay, sleep } from "../util/backoff.js";
import { BoundedMap } from "../util/bounded-map.js";
import { knownRefusals, refusedParam, withoutRefused, type AdjustableParam } from "./param-quirks.js";
import { retryAfterFromHeaders } from "./retry.js";
import { StreamAssembler } from "./stream.js";
import { stripThink } from "./think.js";
import { explainCutOffArguments } from "./cut-off.js";
import type { ChatMessage, ChatRequest, ChatResponse, ContentPart, Provider, ToolCall } from "./types.js";

export type ReasoningEffort = "low" | "medium" | "high";

export interface OpenAIProviderOptions {
  apiKey: string;
  baseURL: string;
  extraHeaders?: Record<string, string>;
  model: string;
  maxTokens: number;
  temperature: number;
  reasoningEffort?: ReasoningEffort | null;
  /** Budget of one attempt, response body included (the SDK's own timeout ends with the headers). */
  timeoutMs: number;
  /** Retries after the first attempt (0 = try once). */
  maxRetries: number;
  retryBaseMs: number;
  retryMaxMs: number;
  /** For deterministic jitter in tests. */
  random?: () => number;
  log?: Logger;
  /** The config key of the provider, used in messages ("check providers.X.apiKey"). */
  name?: string;
  /** Connections to the API at most (an undici Agent); more calls at once wait for one. Default: no limit. */
  maxConnections?: number;
}

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
  usage: z.object({ prompt_tokens: z.number().nullish(), completion_tokens: z.number().nullish() }).nullish(),
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
    ...(usage
      ? { usage: { promptTokens: usage.prompt_tokens ?? 0, completionTokens: usage.completion_tokens ?? 0 } }
      : {}),
    ...(parsed.data.model ? { model: parsed.data.model } : {}),
  };
}

// ------------------------------------------------------------------ errors

interface AttemptState {
  callerAborted: boolean;
  timedOut: boolean;
  timeoutMs: number;
}

/**
 * An empty account, not a busy server: OpenAI sends 429 with code/type
 * insufficient_quota, DeepSeek and OpenRouter send 402. Retrying only delays
 * the same answer, so this is never treated as a rate limit.
 */
function isOutOfCredit(err: APIError): boolean {
  if (err.status === 402) return true;
  return err.status === 429 && (err.code === "insufficient_quota" || err.type === "insufficient_quota");
}

/**
 * The prompt does not fit the model's context window, in the words of the
 * servers palaver talks to: OpenAI and Azure (code context_length_exceeded,
 * "maximum context length is N tokens"), OpenRouter and vLLM ("This
 * endpoint's/model's maximum context length is ..."), llama.cpp ("exceeds the
 * available context size"), ollama ("prompt too long; exceeded max context
 * length"), Anthropic-compatible APIs ("prompt is too long: N tokens > M
 * maximum"), Mistral ("too large for model with N maximum context length")
 * and Gemini ("input token count ... exceeds the maximum number of tokens").
 * A 500 counts only when its text says so (ollama's native errors).
 */
const CONTEXT_OVERFLOW =
  /maximum context length|context[_ ]length[_ ]exceeded|exceeds? the (available )?context (size|window|length)|prompt is too long|prompt too long|too large for model with \d+ maximum context|input token count.*exceeds the maximum|input tokens exceed the configured limit|context window (is )?exceeded|exceeds the model'?s context|too long to fit into the model|input exceeds context length/i;

export function isContextOverflow(status: number | undefined, code: unknown, message: string): boolean {
  if (status !== undefined && ![400, 413, 422, 500].includes(status)) return false;
  return code === "context_length_exceeded" || CONTEXT_OVERFLOW.test(message);
}

/** Any failure of one attempt → LlmError with kind and retryable set. */
export function classifyLlmError(err: unknown, state: AttemptState): LlmError {
  // Which signal fired decides, whatever shape the SDK gave the failure.
  if (state.callerAborted) return new LlmError("LLM call aborted", "aborted", false, { cause: err });
  if (state.timedOut) {
    return new LlmError(`LLM call timed out after ${state.timeoutMs} ms`, "timeout", true, { cause: err });
  }
  if (err instanceof LlmError) return err;
  if (err instanceof APIConnectionTimeoutError) {
    return new LlmError("LLM call timed out", "timeout", true, { cause: err });
  }
  if (err instanceof APIUserAbortError)
    return new LlmError("LLM call aborted", "aborted", false, { cause: err });
  if (err instanceof APIConnectionError) {
    return new LlmError(`cannot reach the LLM: ${err.message}`, "network", true, { cause: err });
  }
  if (err instanceof APIError) {
    // instanceof on a generic class narrows to APIError<any, ...>; pin the defaults.
    const apiErr = err as APIError;
    const status = apiErr.status;
    const retryAfterMs = retryAfterFromHeaders(apiErr.headers) ?? undefined;
    const base = { cause: err, status, retryAfterMs };
    if (status === undefined) return new LlmError(`LLM error: ${err.message}`, "server", true, base);
    if (isOutOfCredit(apiErr)) {
      return new LlmError(
        `the provider account is out of credit (HTTP ${status}): ${err.message}`,
        "quota",
        false,
        base,
      );
    }
    if (status === 429)
      return new LlmError(`rate limited (HTTP 429): ${err.message}`, "rate_limit", true, base);
    if (isContextOverflow(status, apiErr.code, err.message)) {
      return new LlmError(
        `the prompt is longer than the model's context window (HTTP ${status}): ${err.message}`,
        "context_overflow",
        false,
        base,
      );
    }
    if (status >= 500 || status === 408 || status === 409) {
      return new LlmError(`LLM server error (HTTP ${status}): ${err.message}`, "server", true, base);
    }
    if (status === 401 || status === 403) {
      return new LlmError(
        `the LLM rejected the API key (HTTP ${status}): ${err.message}`,
        "auth",
        false,
        base,
      );
    }
    return new LlmError(
      `the LLM refused the request (HTTP ${status}): ${err.message}`,
      "bad_request",
      false,
      base,
    );
  }
  // A body that is not JSON, a dropped stream ...: the next attempt may do better.
  return new LlmError(`unexpected LLM failure: ${errorMessage(err)}`, "invalid_response", true, {
    cause: err,
  });
}

function serverDetail(err: LlmError): string | undefined {
  const cause = err.cause;
  if (!(cause instanceof APIError)) return undefined;
  const body: unknown = cause.error;
  const message =
    body && typeof body === "object" && "message" in body && typeof body.message === "string"
      ? body.message
      : undefined;
  return message ? redactText(message).slice(0, 300) : undefined;
}

// ---------------------------------------------------------------- provider

/** Routes the SDK's own log lines (at "warn" and above) into pino, past which nothing reaches the console. */
function sdkLogger(log: Logger): OpenAI["logger"] {
  const to =
    (level: "error" | "warn" | "info" | "debug") =>
    (message: string, ...rest: unknown[]) =>
      log[level](rest.length ? { details: rest } : {}, `openai sdk: ${message}`);
  return { error: to("error"), warn: to("warn"), info: to("info"), debug: to("debug") };
}

/** The client for one provider. */
function openAIClient(opts: OpenAIProviderOptions, log: Logger): OpenAI {
  return new OpenAI({
    baseURL: opts.baseURL,
    // Local servers need no key; the SDK refuses to send none.
    apiKey: opts.apiKey || "no-key",
    // Not from OPENAI_ORG_ID / OPENAI_PROJECT_ID: those belong to OpenAI, and the provider may be another.
    organization: null,
    project: null,
    // OpenRouter's X-Title, a proxy's key ...: sent with every call, over the SDK's own.
    ...(opts.extraHeaders ? { defaultHeaders: opts.extraHeaders } : {}),
    // Palaver decides about retries (chat() below), so the client tries each call once.
    maxRetries: 0,
    // Bounds the wait for the reply to start; attempt() bounds the whole attempt, body included.
    timeout: opts.timeoutMs,
    logger: sdkLogger(log),
    logLevel: "warn",
    ...(opts.maxConnections ? connectionBound(opts.maxConnections) : {}),
  });
}

/**
 * At most `connections` connections to the API: an undici Agent as the dispatcher of every request,
 * with the fetch of the same undici package (a dispatcher and a fetch of two undici versions do not
 * fit together: the SDK's README, "Configuring proxies").
 */
function connectionBound(connections: number): Pick<ClientOptions, "fetch" | "fetchOptions"> {
  const bound = { fetch: undiciFetch, fetchOptions: { dispatcher: new Agent({ connections }) } };
  // A cast of the types only: the SDK types fetch with @types/node's copy of undici's types
  // (undici-types), of another version than the undici package's own.
  return bound as unknown as Pick<ClientOptions, "fetch" | "fetchOptions">;
}

export class OpenAIProvider implements Provider {
  readonly model: string;
  private readonly log: Logger;
  private readonly client: OpenAI;
  private readonly random: () => number;
  /** Parameters each model has refused with a 400 (a few models per provider; bounded all the same). */
  private readonly learnedRefusals = new BoundedMap<string, Set<AdjustableParam>>(64);

  constructor(private readonly opts: OpenAIProviderOptions) {
    this.model = opts.model;
    this.log = opts.log ?? logger("llm");
    this.random = opts.random ?? Math.random;
    // Here rather than in createProvider, so every provider's key is hidden from logs and errors.
    if (opts.apiKey) registerSecrets([opts.apiKey]);
    this.client = openAIClient(opts, this.log);
  }

  /** The request body for `req`, without what its model refuses (exported through the class for tests). */
  buildBody(req: ChatRequest): ChatCompletionCreateParams {
    const model = req.model ?? this.model;
    const body: ChatCompletionCreateParams = {
      model,
      messages: req.messages.map(toApiMessage),
      ...(req.tools?.length ? { tools: [...req.tools], tool_choice: "auto" as const } : {}),
      max_tokens: req.maxTokens ?? this.opts.maxTokens,
      temperature: req.temperature ?? this.opts.temperature,
      ...(this.opts.reasoningEffort ? { reasoning_effort: this.opts.reasoningEffort } : {}),
      ...(req.onText ? { stream: true, stream_options: { include_usage: true } } : {}),
    };
    return withoutRefused(body, this.refusals(model));
  }

  /** Known and learned refusals of a model. */
  private refusals(model: string): ReadonlySet<AdjustableParam> {
    return new Set([...knownRefusals(model), ...(this.learnedRefusals.get(model) ?? [])]);
  }

  /**
   * When a 400 names an optional parameter the body carries, remember that the
   * model refuses it and say so. Each parameter is learned once per model and
   * is then absent from the body, so this can succeed only a bounded number of times.
   */
  private learnRefusal(body: ChatCompletionCreateParams, failure: LlmError): boolean {
    if (failure.kind !== "bad_request" || !(failure.cause instanceof APIError)) return false;
    const apiErr = failure.cause as APIError;
    const param = refusedParam(body, { param: apiErr.param, message: apiErr.message });
    if (!param) return false;
    const learned = this.learnedRefusals.get(body.model) ?? new Set<AdjustableParam>();
    learned.add(param);
    this.learnedRefusals.set(body.model, learned);
    this.log.warn(
      { model: body.model, param, provider: this.opts.name },
      "the model refuses a request parameter; sending without it from now on",
    );
    return true;
  }

  /** The one retry loop of an LLM call (the client's own retries are off, see openAIClient). */
  async chat(req: ChatRequest, signal?: AbortSignal): Promise<ChatResponse> {
    let body = this.buildBody(req);
    const maxRetries = Math.max(0, Math.floor(this.opts.maxRetries));
    let retries = 0;
    for (let sent = 0; ; sent++) {
      if (signal?.aborted) throw this.finalError(this.abortError(signal.reason), sent);
      let failure: LlmError;
      try {
        return await this.attempt(body, signal, req.onText);
      } catch (err) {
        // attempt() only ever throws classified LlmErrors.
        failure = err as LlmError;
      }
      // Sent again at once, outside the retry budget: bounded by the parameters that can be learned.
      if (this.learnRefusal(body, failure)) {
        body = this.buildBody(req);
        continue;
      }
      // The bound of this loop otherwise: at most maxRetries retries.
      if (!failure.retryable || retries >= maxRetries) throw this.finalError(failure, sent + 1);
      const attempt = retries++;
      const backoff = backoffDelay(attempt, this.opts.retryBaseMs, this.opts.retryMaxMs, this.random);
      // Honour the server's Retry-After, but not an absurd one.
      const requested = Math.min(failure.retryAfterMs ?? 0, this.opts.retryMaxMs * 4);
      const delayMs = Math.max(backoff, requested);
      this.log.warn(
        {
          attempt: attempt + 1,
          maxAttempts: maxRetries + 1,
          delayMs,
          kind: failure.kind,
          status: failure.status,
          model: body.model,
          provider: this.opts.name,
        },
        "LLM call failed, retrying",
      );
      try {
        await sleep(delayMs, signal);
      } catch (err) {
        throw this.finalError(this.abortError(err), sent + 1);
      }
    }
  }

  /**
   * One call through the client. Its signal follows the caller's and ends the attempt after
   * timeoutMs, the streamed body included: the SDK's `timeout` stops counting once the headers
   * are in (openai/openai-node#1825), and an answer that stalls half-way must not hold a turn.
   */
  private async attempt(
    body: ChatCompletionCreateParams,
    signal?: AbortSignal,
    onText?: (textSoFar: string) => void,
  ): Promise<ChatResponse> {
    const deadline = deadlineSignal(this.opts.timeoutMs, signal);
    const options = { signal: deadline.signal };
    const completions = this.client.chat.completions;
    const assembler = new StreamAssembler();
    try {
      if (!body.stream) return parseCompletion(await completions.create(body, options));
      // The SDK ends the iteration quietly when the connection closes or the signal fires;
      // assembler.result() then finds no finish_reason and fails.
      for await (const chunk of await completions.create(body, options)) {
        if (assembler.push(chunk)) onText?.(assembler.visible);
      }
      return parseCompletion(assembler.result());
    } catch (err) {
      const callerAborted = signal?.aborted ?? false;
      const state = {
        callerAborted,
        timedOut: !callerAborted && deadline.signal.aborted,
        timeoutMs: this.opts.timeoutMs,
      };
      const failure = classifyLlmError(err, state);
      // Once text is on the user's screen a retry would show it twice: keep it, say it broke off.
      if (!assembler.visible || failure.kind === "aborted") throw failure;
      throw new LlmError(`the answer broke off mid-way: ${failure.message}`, failure.kind, false, {
        cause: failure.cause,
        status: failure.status,
        partialText: assembler.visible.trimEnd(),
      });
    } finally {
      deadline.dispose();
    }
  }

  private abortError(cause: unknown): LlmError {
    return new LlmError("LLM call aborted", "aborted", false, { cause });
  }

  private finalError(err: LlmError, attempts: number): LlmError {
    const where = this.opts.name ? ` (provider ${this.opts.name})` : "";
    const tries = attempts > 1 ? ` after ${attempts} attempts` : "";
    // A server may echo the key back in its message; redactText knows it (registered in the constructor).
    return new LlmError(redactText(`${err.message}${tries}${where}`), err.kind, err.retryable, {
      cause: err,
      status: err.status,
      retryAfterMs: err.retryAfterMs,
      attempts,
      provider: this.opts.name,
      detail: serverDetail(err),
      ...(err.partialText ? { partialText: err.partialText } : {}),
    });
  }
}

// ----------------------------------------------------------------- factory

/** The provider the config asks for (throws ConfigError when it names none usable). */
export function createProvider(config: Config, log?: Logger): OpenAIProvider {
  const resolved = resolveProvider(config);
  const d = config.agents.defaults;
  return new OpenAIProvider({
    name: resolved.name,
    apiKey: resolved.apiKey,
    baseURL: resolved.baseURL,
    extraHeaders: resolved.extraHeaders,
    model: resolved.model,
    maxTokens: d.maxTokens,
    temperature: d.temperature,
    reasoningEffort: d.reasoningEffort,
    timeoutMs: secondsToTimerMs(d.llm.timeout),
    maxRetries: d.llm.maxRetries,
    retryBaseMs: secondsToTimerMs(d.llm.retryBaseDelay),
    retryMaxMs: secondsToTimerMs(d.llm.retryMaxDelay),
    // One per turn that can wait on the model, plus the subagents and one for memory consolidation.
    maxConnections: d.maxConcurrentTurns + d.maxSubagents + 1,
    ...(log ? { log } : {}),
  });
}
