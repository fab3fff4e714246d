/**
 * What to do after a channel failed to send a reply: drop it at once (the platform can never take it:
 * the bot was blocked, the chat is gone, no access) or try again after a while (the platform asked
 * us to wait, or the failure may pass: network, 5xx). One function decides, one rule per line.
 */
import { backoffDelay } from "../util/backoff.js";
import { ChannelError, errorMessage } from "../util/errors.js";

export interface RetryPolicy {
  /** First backoff delay, doubling per attempt. */
  baseMs: number;
  /** Longest backoff delay between two attempts. */
  maxMs: number;
}

export type SendFailure = { retry: false; reason: string } | { retry: true; reason: string; delayMs: number };

/** Classifies the failure of send attempt number `attempt` (0 = the first). */
export function classifySendFailure(err: unknown, attempt: number, policy: RetryPolicy): SendFailure {
  const reason = errorMessage(err);
  if (err instanceof ChannelError && err.permanent) return { retry: false, reason };
  // The platform said how long to wait: that, not our guess (a shorter wait would only be refused again).
  if (err instanceof ChannelError && err.retryAfterMs !== undefined)
    return { retry: true, reason, delayMs: Math.max(0, err.retryAfterMs) };
  return { retry: true, reason, delayMs: backoffDelay(attempt, policy.baseMs, policy.maxMs) };
}

/** The fields a log line about a failed send carries: which platform call failed, with what code. */
export function failureFields(err: unknown): { platform?: string; method?: string; code?: string | number } {
  if (!(err instanceof ChannelError)) return {};
  return {
    ...(err.platform ? { platform: err.platform } : {}),
    ...(err.method ? { method: err.method } : {}),
    ...(err.code !== undefined ? { code: err.code } : {}),
  };
}
