/** Pure helpers for retrying LLM calls: Retry-After parsing (backoff and sleep are in util/backoff.ts). */

/** A server may ask us to wait; we never wait longer than this whatever it says. */
export const MAX_RETRY_AFTER_MS = 5 * 60_000;

/**
 * Retry-After as milliseconds: either delay-seconds ("2", "0.5") or an
 * HTTP-date. Null for a missing or unreadable value; bounded to [0, 5 min].
 */
export function parseRetryAfter(
  headerValue: string | null | undefined,
  now: number = Date.now(),
): number | null {
  if (headerValue == null) return null;
  const value = headerValue.trim();
  if (!value) return null;
  let ms: number;
  if (/^\d+(\.\d+)?$/.test(value)) {
    ms = Number(value) * 1000;
  } else {
    // An HTTP-date always has a weekday or month name; this keeps "-5" from parsing as a year.
    if (!/[a-z]{3}/i.test(value)) return null;
    const at = Date.parse(value);
    if (Number.isNaN(at)) return null;
    ms = at - now;
  }
  return Math.round(Math.min(MAX_RETRY_AFTER_MS, Math.max(0, ms)));
}

/** Milliseconds from the non-standard `retry-after-ms` header (OpenAI sends it), bounded likewise. */
export function parseRetryAfterMs(headerValue: string | null | undefined): number | null {
  if (headerValue == null) return null;
  const value = headerValue.trim();
  if (!/^\d+(\.\d+)?$/.test(value)) return null;
  return Math.round(Math.min(MAX_RETRY_AFTER_MS, Number(value)));
}

/** The server-requested wait from response headers: retry-after-ms first (finer), then Retry-After. */
export function retryAfterFromHeaders(
  headers: { get(name: string): string | null } | undefined,
  now: number = Date.now(),
): number | null {
  if (!headers) return null;
  return parseRetryAfterMs(headers.get("retry-after-ms")) ?? parseRetryAfter(headers.get("retry-after"), now);
}
