/** Timings of the Telegram channel; the defaults suit Telegram, tests shorten them. */
export interface TelegramTuning {
  /** How often "typing…" is repeated while a turn runs (Telegram shows it for about 5 s). */
  typingIntervalMs: number;
  typingMaxMs: number;
  /** How long to wait for the rest of an album after its last part. */
  albumDelayMs: number;
  /** Polling is restarted when no getUpdates call has finished for this long (default 3 × (pollTimeout + 15 s)). */
  watchdogMs: number | undefined;
  /** Extra time a long poll gets beyond its own timeout before it is given up as dead. */
  pollGraceMs: number;
  /** start() gives up (and rejects) when Telegram has not answered within this. */
  startTimeoutMs: number;
  stopTimeoutMs: number;
  /** Any single Bot API call (uploads included). */
  requestTimeoutSeconds: number;
  /**
   * The longest 429 retry_after waited out inside a call. A longer one fails the call with a
   * ChannelError carrying retryAfterMs, so the outbox retries later and other chats go on.
   */
  maxRateLimitWaitSeconds: number;
  /** Backoff after polling failed while running (409, 401, …) and between network retries. */
  retryBaseMs: number;
  retryMaxMs: number;
  networkRetries: number;
}

export const DEFAULT_TUNING: TelegramTuning = {
  typingIntervalMs: 4000,
  typingMaxMs: 5 * 60_000,
  albumDelayMs: 600,
  watchdogMs: undefined,
  pollGraceMs: 15_000,
  startTimeoutMs: 30_000,
  stopTimeoutMs: 5000,
  requestTimeoutSeconds: 300,
  maxRateLimitWaitSeconds: 5,
  retryBaseMs: 2000,
  retryMaxMs: 5 * 60_000,
  networkRetries: 3,
};

export function seconds(ms: number): string {
  return ms % 1000 === 0 ? String(ms / 1000) : (ms / 1000).toFixed(1);
}
