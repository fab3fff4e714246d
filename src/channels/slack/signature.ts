/**
 * Slack's request signing for the HTTP Events API, pure: every request carries
 * `x-slack-request-timestamp` and `x-slack-signature` = `v0=` + hex HMAC-SHA256
 * of `v0:<timestamp>:<raw body>` under the app's signing secret. The headers
 * are checked before the body is read (a stale or malformed request costs no
 * reading), the signature before the body is parsed.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";

/** Slack's rule: a timestamp further off than this is a replay (or a clock to fix). */
const MAX_CLOCK_SKEW_S = 5 * 60;

export type SignedHeaders =
  { ok: true; timestamp: string; signature: string } | { ok: false; why: string; unsigned?: true };

/** The signing headers, present once each, the timestamp within MAX_CLOCK_SKEW_S of `nowMs`. */
export function signedHeaders(headers: IncomingHttpHeaders, nowMs: number): SignedHeaders {
  const timestamp = headers["x-slack-request-timestamp"];
  const signature = headers["x-slack-signature"];
  if (timestamp === undefined && signature === undefined) {
    return { ok: false, why: "the request is not signed", unsigned: true };
  }
  if (typeof timestamp !== "string" || !/^\d{1,12}$/.test(timestamp)) {
    return { ok: false, why: "x-slack-request-timestamp is missing or not a number" };
  }
  if (typeof signature !== "string" || !/^v0=[0-9a-f]{64}$/.test(signature)) {
    return { ok: false, why: "x-slack-signature is missing or not a v0 signature" };
  }
  if (Math.abs(nowMs / 1000 - Number(timestamp)) > MAX_CLOCK_SKEW_S) {
    return {
      ok: false,
      why: "x-slack-request-timestamp is more than 5 minutes off (replayed, or check the clock)",
    };
  }
  return { ok: true, timestamp, signature };
}

/** Whether `signature` is the signing secret's over this timestamp and body, compared in constant time. */
export function signatureMatches(
  secret: string,
  timestamp: string,
  signature: string,
  body: Buffer,
): boolean {
  const expected = Buffer.from(
    `v0=${createHmac("sha256", secret).update(`v0:${timestamp}:`).update(body).digest("hex")}`,
  );
  const given = Buffer.from(signature);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * A verified body as Slack sent it: JSON (events, url_verification), a form (slash commands),
 * or a form whose `payload` field is JSON (interactivity). Throws on malformed JSON.
 */
export function parseSlackBody(contentType: string | undefined, body: Buffer): unknown {
  const text = body.toString("utf8");
  if (mediaType(contentType) !== "application/x-www-form-urlencoded") return JSON.parse(text) as unknown;
  const form = Object.fromEntries(new URLSearchParams(text));
  return typeof form.payload === "string" ? (JSON.parse(form.payload) as unknown) : form;
}

/**
 * Slack's TLS check of a slash command URL: a form with `ssl_check=1` that Slack may send
 * unsigned. Bolt answers it without a signature too; nothing in it is handled.
 */
export function isSslCheck(contentType: string | undefined, body: Buffer): boolean {
  return (
    mediaType(contentType) === "application/x-www-form-urlencoded" &&
    new URLSearchParams(body.toString("utf8")).get("ssl_check") === "1"
  );
}

function mediaType(contentType: string | undefined): string {
  return (contentType ?? "").split(";")[0]!.trim().toLowerCase();
}
