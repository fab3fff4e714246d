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
import type { ClientOptions, OpenAI } from "openai";
import { APIError } from "openai/error";
import type { ChatCompletionCreateParams } from "openai/resources/chat/completions";
import type { Config } from "../config/schema.js";
import { logger, redactText, registerSecrets, type Logger } from "../log.js";
import { backoffDelay, sleep } from "../util/backoff.js";
import { BoundedMap } from "../util/bounded-map.js";
import { Semaphore } from "../util/semaphore.js";
import { LlmError } from "../util/errors.js";
import { deadlineSignal } from "../util/timeout.js";
import { secondsToTimerMs } from "../util/timers.js";
import { classifyLlmError, connectionCode, serverDetail } from "./classify-error.js";
import { knownRefusals, refusedParam, withoutRefused, type AdjustableParam } from "./param-quirks.js";
import { resolveProvider } from "./providers.js";
import { StreamAssembler } from "./stream.js";
import type { ChatRequest, ChatResponse, Provider } from "./types.js";
import { openAIClient } from "./openai-sdk.js";
import { parseCompletion, toApiMessage } from "./wire.js";

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
  /** Calls in flight at most (so connections to the API at most); more wait their turn. Default: no limit. */
  maxConcurrentCalls?: number;
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

/** What the client of one provider is made with. */
function clientOptions(opts: OpenAIProviderOptions, log: Logger): ClientOptions {
  return {
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
    // Node's own fetch and keep-alive pool; OpenAIProvider bounds the calls in flight, and so the connections.
  };
}

export class OpenAIProvider implements Provider {
  readonly model: string;
  private readonly log: Logger;
  /** Made on the first call (openai-sdk.ts), then reused. */
  private client: Promise<OpenAI> | undefined;
  private readonly random: () => number;
  private readonly slots: Semaphore | undefined;
  /** Parameters each model has refused with a 400 (a few models per provider; bounded all the same). */
  private readonly learnedRefusals = new BoundedMap<string, Set<AdjustableParam>>(64);

  constructor(private readonly opts: OpenAIProviderOptions) {
    this.model = opts.model;
    this.log = opts.log ?? logger("llm");
    this.random = opts.random ?? Math.random;
    // Here rather than in createProvider, so every provider's key is hidden from logs and errors.
    if (opts.apiKey) registerSecrets([opts.apiKey]);
    this.slots = opts.maxConcurrentCalls ? new Semaphore(opts.maxConcurrentCalls) : undefined;
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

  /** The one retry loop of an LLM call (the client's own retries are off, see clientOptions). */
  async chat(req: ChatRequest, signal?: AbortSignal): Promise<ChatResponse> {
    let body = this.buildBody(req);
    const maxRetries = Math.max(0, Math.floor(this.opts.maxRetries));
    let retries = 0;
    for (let sent = 0; ; sent++) {
      if (signal?.aborted) throw this.finalError(this.abortError(signal.reason), sent, body.model);
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
      if (!failure.retryable || retries >= maxRetries) throw this.finalError(failure, sent + 1, body.model);
      const attempt = retries++;
      const backoff = backoffDelay(attempt, this.opts.retryBaseMs, this.opts.retryMaxMs, this.random);
      // Honour the server's Retry-After, but not an absurd one.
      const requested = Math.min(failure.retryAfterMs ?? 0, this.opts.retryMaxMs * 4);
      const delayMs = Math.max(backoff, requested);
      // One line per retry at info (the final failure is the user's message): where, what, when next.
      const what = connectionCode(failure) ?? (failure.status ? `HTTP ${failure.status}` : failure.kind);
      this.log.info(
        { provider: this.opts.name, model: body.model, kind: failure.kind },
        `LLM call to ${this.url} failed (${what}); retry ${attempt + 1} of ${maxRetries} in ${delayMs} ms`,
      );
      try {
        await sleep(delayMs, signal);
      } catch (err) {
        throw this.finalError(this.abortError(err), sent + 1, body.model);
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
    // A slot per attempt, not per call: a call waiting out a retry delay holds no connection.
    const release = await this.slots?.acquire();
    const deadline = deadlineSignal(this.opts.timeoutMs, signal);
    const options = { signal: deadline.signal };
    const assembler = new StreamAssembler();
    try {
      const { completions } = (await this.sdkClient()).chat;
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
      release?.();
    }
  }

  private sdkClient(): Promise<OpenAI> {
    return (this.client ??= openAIClient(clientOptions(this.opts, this.log)));
  }

  private abortError(cause: unknown): LlmError {
    return new LlmError("LLM call aborted", "aborted", false, { cause });
  }

  /** The API base URL as messages show it: credentials in it masked. */
  private get url(): string {
    return redactText(this.opts.baseURL);
  }

  private finalError(err: LlmError, attempts: number, model: string): LlmError {
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
      url: this.url,
      model,
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
    maxConcurrentCalls: d.maxConcurrentTurns + d.maxSubagents + 1,
    ...(log ? { log } : {}),
  });
}
