/** What Slack delivered, the same for Socket Mode envelopes and HTTP bodies (dispatch.ts), pure. */
import { describe, expect, it } from "vitest";
import { fromEnvelope, fromHttpBody, httpAnswer } from "../../../src/channels/slack/dispatch.js";

const event = { type: "message", channel: "D1", user: "U1", text: "hi", ts: "1.1" };
const callback = { type: "event_callback", team_id: "T1", event };
const command = { command: "/palaver", text: "stop", user_id: "U1", channel_id: "D1" };
const press = { type: "block_actions", user: { id: "U1" }, actions: [{ action_id: "q:a:b" }] };

describe("fromEnvelope (Socket Mode)", () => {
  it("names events, slash commands and interactions by the envelope's type", () => {
    expect(fromEnvelope("events_api", callback)).toEqual({ kind: "event", event });
    expect(fromEnvelope("slash_commands", command)).toEqual({ kind: "command", command });
    expect(fromEnvelope("interactive", press)).toEqual({ kind: "interaction", payload: press });
  });

  it("ignores other envelopes and payloads that are not objects", () => {
    expect(fromEnvelope("hello_there", {}).kind).toBe("ignore");
    expect(fromEnvelope("events_api", { type: "event_callback" }).kind).toBe("ignore");
    expect(fromEnvelope("slash_commands", null).kind).toBe("ignore");
    expect(fromEnvelope("interactive", [press]).kind).toBe("ignore");
  });
});

describe("fromHttpBody (Events API over HTTP)", () => {
  it("tells the kinds apart by the body's shape", () => {
    expect(fromHttpBody(callback)).toEqual({ kind: "event", event });
    expect(fromHttpBody(command)).toEqual({ kind: "command", command });
    expect(fromHttpBody(press)).toEqual({ kind: "interaction", payload: press });
    expect(fromHttpBody({ type: "view_submission", view: {} }).kind).toBe("interaction");
  });

  it("answers url_verification with its challenge and ssl_check with nothing", () => {
    const challenge = fromHttpBody({ type: "url_verification", challenge: "c1", token: "t" });
    expect(challenge).toEqual({ kind: "challenge", challenge: "c1" });
    expect(httpAnswer(challenge)).toEqual({ status: 200, json: { challenge: "c1" } });
    expect(fromHttpBody({ ssl_check: "1", command: "/palaver" })).toEqual({ kind: "sslCheck" });
    expect(httpAnswer(fromHttpBody(callback))).toEqual({ status: 200 });
  });

  it("ignores bodies of no known kind", () => {
    expect(fromHttpBody({ hello: "world" }).kind).toBe("ignore");
    expect(fromHttpBody("text").kind).toBe("ignore");
    expect(fromHttpBody({ type: "url_verification" }).kind).toBe("ignore");
  });
});
