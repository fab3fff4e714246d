/**
 * Any failure of one LLM call → an LlmError with its kind and whether a retry may help: the SDK's
 * error classes by status, a context overflow in the words of the servers palaver talks to, and
 * which signal ended the call. Pure.
 */
import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from "openai/error";
import { redactText } from "../log.js";
import { LlmError, errorMessage } from "../util/errors.js";
import { retryAfterFromHeaders } from "./retry.js";

export interface AttemptState {
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

/** The server's own words about a failure, redacted and short, for the user. */
export function serverDetail(err: LlmError): string | undefined {
  const cause = err.cause;
  if (!(cause instanceof APIError)) return undefined;
  const body: unknown = cause.error;
  const message =
    body && typeof body === "object" && "message" in body && typeof body.message === "string"
      ? body.message
      : undefined;
  return message ? redactText(message).slice(0, 300) : undefined;
}

/**
 * The system's code for a connection that failed (ECONNREFUSED, ENOTFOUND, a certificate's code...),
 * from the chain of causes under the SDK's "Connection error.": the words that say what to fix.
 */
export function connectionCode(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && code !== "") return code;
    // undici refuses some ports outright (fetch's "bad port" list) without a code.
    if (e.message === "bad port") return "BAD_PORT";
  }
  return undefined;
}
