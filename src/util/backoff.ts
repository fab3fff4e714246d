/** Waiting between attempts: exponential backoff with jitter, and an abortable sleep. */
import { setTimeout as delay } from "node:timers/promises";
import { timerDelay } from "./timers.js";

/**
 * Delay before retry number `attempt` (0 = the first retry): exponential
 * (base·2^attempt) capped at maxMs, with "equal jitter" — a random point in
 * the upper half — so concurrent clients spread out but never retry at once.
 */
export function backoffDelay(
  attempt: number,
  baseMs: number,
  maxMs: number,
  random: () => number = Math.random,
): number {
  const n = Number.isFinite(attempt) && attempt > 0 ? Math.floor(attempt) : 0;
  const base = Math.max(0, baseMs);
  const cap = Math.max(0, maxMs);
  // 2 ** n overflows to Infinity for huge n; Math.min keeps it capped.
  const exp = Math.min(cap, base * 2 ** n);
  const r = Math.min(1, Math.max(0, random()));
  return Math.round(exp / 2 + (exp / 2) * r);
}

/** Waits `ms`; rejects at once with an AbortError (name "AbortError") when `signal` aborts. */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  await delay(timerDelay(ms), undefined, signal ? { signal } : undefined);
}
