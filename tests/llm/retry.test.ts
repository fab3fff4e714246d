import { describe, expect, it } from "vitest";
import {
  MAX_RETRY_AFTER_MS,
  parseRetryAfter,
  parseRetryAfterMs,
  retryAfterFromHeaders,
} from "../../src/llm/retry.js";
import { backoffDelay, sleep } from "../../src/util/backoff.js";
import { isAbortError } from "../../src/util/errors.js";

describe("backoffDelay", () => {
  it("doubles per attempt, with jitter in the upper half", () => {
    expect(backoffDelay(0, 100, 10_000, () => 1)).toBe(100);
    expect(backoffDelay(0, 100, 10_000, () => 0)).toBe(50);
    expect(backoffDelay(1, 100, 10_000, () => 1)).toBe(200);
    expect(backoffDelay(3, 100, 10_000, () => 1)).toBe(800);
    expect(backoffDelay(3, 100, 10_000, () => 0.5)).toBe(600);
  });

  it("is capped at maxMs, even for huge attempts", () => {
    expect(backoffDelay(10, 1000, 5000, () => 1)).toBe(5000);
    expect(backoffDelay(5000, 1000, 5000, () => 1)).toBe(5000);
    expect(backoffDelay(5000, 1000, 5000, () => 0)).toBe(2500);
  });

  it("stays within bounds for any random value", () => {
    for (let attempt = 0; attempt < 8; attempt++) {
      for (let i = 0; i < 50; i++) {
        const d = backoffDelay(attempt, 10, 300);
        const exp = Math.min(300, 10 * 2 ** attempt);
        expect(d).toBeGreaterThanOrEqual(exp / 2 - 0.5);
        expect(d).toBeLessThanOrEqual(exp);
      }
    }
  });

  it("treats odd inputs safely", () => {
    expect(backoffDelay(-3, 100, 1000, () => 1)).toBe(100);
    expect(backoffDelay(Number.NaN, 100, 1000, () => 1)).toBe(100);
    expect(backoffDelay(1, 100, 1000, () => 7)).toBe(200);
  });
});

describe("parseRetryAfter", () => {
  const now = Date.parse("2024-01-01T00:00:00Z");

  it("reads seconds", () => {
    expect(parseRetryAfter("2", now)).toBe(2000);
    expect(parseRetryAfter(" 0.25 ", now)).toBe(250);
    expect(parseRetryAfter("0", now)).toBe(0);
  });

  it("reads an HTTP date relative to now", () => {
    expect(parseRetryAfter("Mon, 01 Jan 2024 00:00:30 GMT", now)).toBe(30_000);
    expect(parseRetryAfter("Sun, 31 Dec 2023 23:00:00 GMT", now)).toBe(0);
  });

  it("is bounded and ignores garbage", () => {
    expect(parseRetryAfter("86400", now)).toBe(MAX_RETRY_AFTER_MS);
    expect(parseRetryAfter("Tue, 02 Jan 2024 00:00:00 GMT", now)).toBe(MAX_RETRY_AFTER_MS);
    expect(parseRetryAfter("soon", now)).toBeNull();
    expect(parseRetryAfter("-5", now)).toBeNull();
    expect(parseRetryAfter("", now)).toBeNull();
    expect(parseRetryAfter(null, now)).toBeNull();
    expect(parseRetryAfter(undefined, now)).toBeNull();
  });

  it("prefers retry-after-ms in headers", () => {
    expect(parseRetryAfterMs("150")).toBe(150);
    expect(parseRetryAfterMs("x")).toBeNull();
    expect(retryAfterFromHeaders(new Headers({ "retry-after-ms": "120", "retry-after": "3" }), now)).toBe(
      120,
    );
    expect(retryAfterFromHeaders(new Headers({ "retry-after": "3" }), now)).toBe(3000);
    expect(retryAfterFromHeaders(new Headers({}), now)).toBeNull();
    expect(retryAfterFromHeaders(undefined, now)).toBeNull();
  });
});

describe("sleep", () => {
  it("does not end before the given time: a shorter timer armed with it fires first", async () => {
    // Timers armed in one go count from the same moment and fire in order of their delays, so the
    // order proves the wait without measuring it (that it ends at all is the test finishing).
    const order: string[] = [];
    const shorter = new Promise<void>((resolve) => setTimeout(() => resolve(void order.push("39 ms")), 39));
    await sleep(40);
    order.push("sleep(40)");
    await shorter;
    expect(order).toEqual(["39 ms", "sleep(40)"]);
  });

  it("rejects promptly with an AbortError when aborted", async () => {
    const ac = new AbortController();
    // Far beyond the test's limit: only the abort can settle it, so no clock is needed.
    const p = sleep(600_000, ac.signal);
    setTimeout(() => ac.abort(), 20);
    const err = await p.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isAbortError(err)).toBe(true);
  });

  it("rejects at once when the signal is already aborted", async () => {
    const ac = new AbortController();
    ac.abort();
    await expect(sleep(600_000, ac.signal)).rejects.toMatchObject({ name: "AbortError" });
  });
});
