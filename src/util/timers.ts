/**
 * Node timers hold at most 2^31-1 ms (about 24.8 days). A longer delay is not
 * an error: Node prints a warning and fires after 1 ms, so a "wait a month"
 * heartbeat becomes a busy loop. Every duration palaver reads from config is
 * bounded by MAX_TIMER_SECONDS in the schema; timerDelay() is the second line
 * of defence for values that reach a timer by another road.
 */

/** The longest delay setTimeout/setInterval/AbortSignal.timeout accept without overflowing. */
export const MAX_TIMER_MS = 2 ** 31 - 1;
/** MAX_TIMER_MS in whole seconds (2,147,483 s): the maximum of every duration in the config schema. */
export const MAX_TIMER_SECONDS = Math.floor(MAX_TIMER_MS / 1000);

/** `ms` made safe for a Node timer: NaN and negatives become 0, anything too long MAX_TIMER_MS. */
export function timerDelay(ms: number): number {
  if (Number.isNaN(ms) || ms <= 0) return 0;
  return Math.min(Math.round(ms), MAX_TIMER_MS);
}

/** Seconds from config as a timer delay in ms (see timerDelay). */
export function secondsToTimerMs(seconds: number): number {
  return timerDelay(seconds * 1000);
}
