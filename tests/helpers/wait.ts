/**
 * Waits are for conditions, never for time: the limit only ends a test that
 * hangs, so it is never below MIN_WAIT_MS whatever the caller passes. On a
 * loaded machine a condition that usually takes milliseconds can take
 * seconds, and a short limit turned that into a failure.
 */
export const MIN_WAIT_MS = 30_000;

/** Polls until `cond` holds, failing the test after `timeoutMs` (at least MIN_WAIT_MS). */
export async function waitFor(
  cond: () => boolean | Promise<boolean>,
  timeoutMs = MIN_WAIT_MS,
  what = "condition",
): Promise<void> {
  const limit = Math.max(timeoutMs, MIN_WAIT_MS);
  const deadline = Date.now() + limit;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`${what} not met within ${limit} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
