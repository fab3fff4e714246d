/** Slack's request signing (signature.ts), pure: the headers, the HMAC, the body formats. */
import { describe, expect, it } from "vitest";
import {
  isSslCheck,
  parseSlackBody,
  signatureMatches,
  signedHeaders,
} from "../../../src/channels/slack/signature.js";
import { signSlackRequest } from "../../fakes/slack-server.js";

const SECRET = "8f742231b10e8888abcd99yyyzzz85a5";
const NOW_S = 1_531_420_618;
const FORM = "application/x-www-form-urlencoded";

describe("signedHeaders", () => {
  const signed = signSlackRequest(SECRET, "{}", NOW_S);

  it("takes a v0 signature with a timestamp within five minutes either way", () => {
    expect(signedHeaders(signed, NOW_S * 1000)).toEqual({
      ok: true,
      timestamp: String(NOW_S),
      signature: signed["x-slack-signature"],
    });
    expect(signedHeaders(signed, (NOW_S + 300) * 1000).ok).toBe(true);
    expect(signedHeaders(signed, (NOW_S - 300) * 1000).ok).toBe(true);
  });

  it("refuses a timestamp more than five minutes off, in the past or the future", () => {
    expect(signedHeaders(signed, (NOW_S + 301) * 1000)).toMatchObject({ ok: false, why: /5 minutes/ });
    expect(signedHeaders(signed, (NOW_S - 301) * 1000)).toMatchObject({ ok: false, why: /5 minutes/ });
  });

  it("refuses missing, repeated and malformed headers; says when there are none at all", () => {
    expect(signedHeaders({}, NOW_S * 1000)).toEqual({
      ok: false,
      why: "the request is not signed",
      unsigned: true,
    });
    const ts = signed["x-slack-request-timestamp"]!;
    const sig = signed["x-slack-signature"]!;
    for (const headers of [
      { "x-slack-signature": sig },
      { "x-slack-request-timestamp": ts },
      { "x-slack-request-timestamp": "soon", "x-slack-signature": sig },
      { "x-slack-request-timestamp": ts, "x-slack-signature": sig.replace("v0=", "v1=") },
      { "x-slack-request-timestamp": ts, "x-slack-signature": "v0=abc" },
      { "x-slack-request-timestamp": [ts, ts], "x-slack-signature": sig },
    ]) {
      const verdict = signedHeaders(headers, NOW_S * 1000);
      expect(verdict.ok).toBe(false);
      expect(verdict).not.toHaveProperty("unsigned");
    }
  });
});

describe("signatureMatches", () => {
  // The worked example of Slack's "Verifying requests from Slack".
  const body =
    "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V" +
    "&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=" +
    "&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN" +
    "&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";

  it("accepts the signing secret's HMAC of v0:timestamp:body (Slack's documented example)", () => {
    expect(
      signatureMatches(
        SECRET,
        String(NOW_S),
        "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503",
        Buffer.from(body),
      ),
    ).toBe(true);
  });

  it("refuses another secret, timestamp or body", () => {
    const sig = signSlackRequest(SECRET, body, NOW_S)["x-slack-signature"]!;
    expect(signatureMatches(SECRET, String(NOW_S), sig, Buffer.from(body))).toBe(true);
    expect(signatureMatches("other", String(NOW_S), sig, Buffer.from(body))).toBe(false);
    expect(signatureMatches(SECRET, String(NOW_S + 1), sig, Buffer.from(body))).toBe(false);
    expect(signatureMatches(SECRET, String(NOW_S), sig, Buffer.from(`${body} `))).toBe(false);
    expect(signatureMatches(SECRET, String(NOW_S), "v0=short", Buffer.from(body))).toBe(false);
  });

  it("signs the body's bytes as sent (UTF-8 included)", () => {
    const text = JSON.stringify({ text: "grüße 👋" });
    const sig = signSlackRequest(SECRET, text, NOW_S)["x-slack-signature"]!;
    expect(signatureMatches(SECRET, String(NOW_S), sig, Buffer.from(text, "utf8"))).toBe(true);
  });
});

describe("parseSlackBody", () => {
  it("reads JSON, forms, and a form's payload JSON", () => {
    expect(parseSlackBody("application/json", Buffer.from('{"type":"event_callback"}'))).toEqual({
      type: "event_callback",
    });
    expect(parseSlackBody(`${FORM}; charset=utf-8`, Buffer.from("command=%2Fpalaver&text=a+b"))).toEqual({
      command: "/palaver",
      text: "a b",
    });
    const payload = encodeURIComponent(JSON.stringify({ type: "block_actions", actions: [] }));
    expect(parseSlackBody(FORM, Buffer.from(`payload=${payload}`))).toEqual({
      type: "block_actions",
      actions: [],
    });
  });

  it("throws on malformed JSON", () => {
    expect(() => parseSlackBody("application/json", Buffer.from("{nope"))).toThrow(SyntaxError);
    expect(() => parseSlackBody(FORM, Buffer.from("payload=%7Bnope"))).toThrow(SyntaxError);
  });
});

describe("isSslCheck", () => {
  it("is a form with ssl_check=1 and nothing else counts", () => {
    expect(isSslCheck(FORM, Buffer.from("ssl_check=1&token=t"))).toBe(true);
    expect(isSslCheck(FORM, Buffer.from("ssl_check=true"))).toBe(false);
    expect(isSslCheck("application/json", Buffer.from('{"ssl_check":"1"}'))).toBe(false);
  });
});
