/**
 * The one small error hierarchy of palaver. Every layer wraps what it catches
 * with `{ cause }` so the original stack is never lost.
 */
export class PalaverError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Bad configuration. The CLI exits with EX_CONFIG (78) on it. */
export class ConfigError extends PalaverError {
  constructor(
    message: string,
    /** One line per bad path: "agents.defaults.maxTokens: expected number, got string". */
    readonly problems: string[] = [],
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

export interface ChannelErrorOptions extends ErrorOptions {
  /** "telegram", "slack", "discord" ... */
  platform?: string;
  /** The platform call that failed ("sendMessage", "chat.postMessage"). */
  method?: string;
  /** The platform's own error code (HTTP status, Slack error string, Discord code). */
  code?: string | number;
  /** Trying again can never succeed (blocked by the user, chat gone, no access): drop, don't retry. */
  permanent?: boolean;
  /** The platform asked us to wait this long before trying again. */
  retryAfterMs?: number;
}

/**
 * A platform call failed. Each adapter sets the fields at its single send
 * point, so the outbox can tell a reply that can never be delivered from one
 * worth retrying.
 */
export class ChannelError extends PalaverError {
  readonly platform: string | undefined;
  readonly method: string | undefined;
  readonly code: string | number | undefined;
  readonly permanent: boolean;
  readonly retryAfterMs: number | undefined;

  constructor(message: string, options?: ChannelErrorOptions) {
    super(message, options);
    this.platform = options?.platform;
    this.method = options?.method;
    this.code = options?.code;
    this.permanent = options?.permanent ?? false;
    this.retryAfterMs = options?.retryAfterMs;
  }
}

export type LlmErrorKind =
  | "rate_limit"
  /** The provider account is out of credit or over its quota: waiting will not help. */
  | "quota"
  | "server"
  | "network"
  | "timeout"
  | "auth"
  | "bad_request"
  /** The prompt is longer than the model's context window (a kind of bad request). */
  | "context_overflow"
  | "aborted"
  | "invalid_response"
  /** Not tried: the circuit breaker has paused this model after repeated failures. */
  | "unavailable";

export interface LlmErrorOptions extends ErrorOptions {
  status?: number;
  retryAfterMs?: number;
  /** How many attempts were made before giving up. */
  attempts?: number;
  /** The config key of the provider ("openrouter"), for messages that say what to check. */
  provider?: string;
  /** The server's own error text, already redacted, for messages to the user. */
  detail?: string;
  /** A streamed answer broke off after this much was shown: it is kept, not retried. */
  partialText?: string;
  /** The API base URL the call went to (credentials masked), so a message can name it. */
  url?: string;
  /** The model asked for, so a 404 can say which name the server does not know. */
  model?: string;
}

export class LlmError extends PalaverError {
  readonly status: number | undefined;
  /** Server-requested wait (Retry-After), when it sent one. */
  readonly retryAfterMs: number | undefined;
  readonly attempts: number;
  readonly provider: string | undefined;
  readonly detail: string | undefined;
  readonly partialText: string | undefined;
  readonly url: string | undefined;
  readonly model: string | undefined;

  constructor(
    message: string,
    readonly kind: LlmErrorKind,
    /** Whether trying the same call again may succeed. */
    readonly retryable: boolean,
    options?: LlmErrorOptions,
  ) {
    super(message, options);
    this.status = options?.status;
    this.retryAfterMs = options?.retryAfterMs;
    this.attempts = options?.attempts ?? 1;
    this.provider = options?.provider;
    this.detail = options?.detail;
    this.partialText = options?.partialText;
    this.url = options?.url;
    this.model = options?.model;
  }
}

/** A tool failed in a way the model should be told about (never fatal to the loop). */
export class ToolError extends PalaverError {}

/** Exit code for configuration errors, from sysexits.h (EX_CONFIG). */
export const EXIT_CONFIG = 78;

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}

export function isAbortError(err: unknown): boolean {
  return (
    err instanceof Error && (err.name === "AbortError" || (err instanceof LlmError && err.kind === "aborted"))
  );
}
