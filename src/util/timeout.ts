/** Bounded waits: every wait palaver does on something it does not control goes through these. */
import { PalaverError } from "./errors.js";

/** A bounded wait ran out. `what` says what was waited for ("connecting to Slack"). */
export class TimeoutError extends PalaverError {
  constructor(
    readonly what: string,
    readonly ms: number,
  ) {
    super(`${what} timed out after ${formatSeconds(ms)}`);
  }
}

/**
 * `promise`, or a TimeoutError after `ms`, or the signal's reason as soon as it
 * aborts. The work itself goes on (pass the same signal to it to end it too);
 * a late rejection of `promise` is swallowed so it is never unhandled.
 */
export async function withTimeout<T>(
  promise: Promise<T>,
  ms: number,
  what: string,
  signal?: AbortSignal,
): Promise<T> {
  promise.catch(() => undefined);
  signal?.throwIfAborted();
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(what, ms)), ms);
    if (signal) {
      onAbort = () => reject(signal.reason instanceof Error ? signal.reason : abortError());
      signal.addEventListener("abort", onAbort, { once: true });
    }
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
    if (onAbort) signal?.removeEventListener("abort", onAbort);
  }
}

/** `promise`, or the signal's reason as soon as it aborts (the work itself goes on). */
export async function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  promise.catch(() => undefined);
  signal.throwIfAborted();
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_resolve, reject) => {
    onAbort = () => reject(signal.reason instanceof Error ? signal.reason : abortError());
    signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    return await Promise.race([promise, aborted]);
  } finally {
    signal.removeEventListener("abort", onAbort!);
  }
}

/**
 * Waits for `promise` to settle, but never longer than `ms`; never rejects.
 * True when it settled in time. For shutdown paths that must not hang.
 */
export async function settleWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const settled = promise.then(
    () => true,
    () => true,
  );
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([settled, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A signal that aborts after `ms` or when `parent` aborts; dispose() clears the timer. */
export function deadlineSignal(
  ms: number,
  parent?: AbortSignal,
): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  const abort = () => controller.abort(parent?.aborted ? parent.reason : new TimeoutError("waiting", ms));
  const timer = setTimeout(abort, ms);
  if (parent?.aborted) abort();
  else parent?.addEventListener("abort", abort, { once: true });
  return {
    signal: controller.signal,
    dispose: () => {
      clearTimeout(timer);
      parent?.removeEventListener("abort", abort);
    },
  };
}

function abortError(): Error {
  const err = new Error("aborted");
  err.name = "AbortError";
  return err;
}

function formatSeconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}
