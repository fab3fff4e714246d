/** HTTP Events API mode: Bolt's HTTPReceiver verifies Slack's request signatures and acks; replies go out by the Web API. */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BOT_USER_ID, dmEvent, signSlackRequest, TEAM_ID } from "../../fakes/slack-server.js";
import { slackRig, type SlackRig } from "./helpers.js";

const SECRET = "fake-signing-secret";
let rig: SlackRig;
let url: string;

beforeEach(async () => {
  rig = await slackRig(
    { mode: "http", appToken: "", signingSecret: SECRET, port: 0, path: "/hooks/slack" },
    { tuning: { httpHost: "127.0.0.1" } },
  );
  await rig.start();
  const address = rig.channel.address!;
  url = `http://127.0.0.1:${address.port}/hooks/slack`;
});
afterEach(async () => rig.cleanup());

function eventBody(event: Record<string, unknown>): string {
  return JSON.stringify({
    token: "verification-token",
    team_id: TEAM_ID,
    api_app_id: "A1",
    event,
    type: "event_callback",
    event_id: "Ev1",
    event_time: Math.floor(Date.now() / 1000),
    authorizations: [{ team_id: TEAM_ID, user_id: BOT_USER_ID, is_bot: true }],
  });
}

/** A signed DM that must come through as inbound message #n: what was sent before it is settled. */
async function takesMarker(n = 1): Promise<void> {
  const body = eventBody(dmEvent("marker"));
  expect((await post(body, signSlackRequest(SECRET, body))).status).toBe(200);
  expect((await rig.nextInbound(n)).content).toBe("marker");
}

async function post(body: string, headers: Record<string, string>, type = "application/json") {
  return fetch(url, { method: "POST", body, headers: { "content-type": type, ...headers } });
}

describe("Slack HTTP mode", () => {
  it("listens without a Socket Mode connection", () => {
    expect(rig.fake.callsTo("apps.connections.open")).toHaveLength(0);
    expect(rig.fake.connections).toBe(0);
  });

  it("answers Slack's url_verification challenge", async () => {
    const body = JSON.stringify({ type: "url_verification", challenge: "abc123", token: "t" });
    const res = await post(body, signSlackRequest(SECRET, body));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ challenge: "abc123" });
    expect(rig.inbound).toHaveLength(0);
  });

  it("takes a correctly signed event", async () => {
    const body = eventBody(dmEvent("over http"));
    const res = await post(body, signSlackRequest(SECRET, body));
    expect(res.status).toBe(200);
    const msg = await rig.nextInbound(1);
    expect(msg).toMatchObject({ chatId: "D1", senderId: "U1", content: "over http", sessionKey: "slack:D1" });
  });

  it("refuses a bad signature, a wrong secret and a stale timestamp with 401, taking nothing", async () => {
    const body = eventBody(dmEvent("forged"));
    const bad = await post(body, { ...signSlackRequest(SECRET, body), "x-slack-signature": "v0=deadbeef" });
    expect(bad.status).toBe(401);
    const flipped = signSlackRequest(SECRET, body);
    flipped["x-slack-signature"] = flipped["x-slack-signature"]!.replace(/.$/, (c) =>
      c === "0" ? "1" : "0",
    );
    expect((await post(body, flipped)).status).toBe(401);
    const wrongSecret = await post(body, signSlackRequest("not-the-secret", body));
    expect(wrongSecret.status).toBe(401);
    // Signed for another body: the signature covers every byte.
    const other = eventBody(dmEvent("another"));
    expect((await post(body, signSlackRequest(SECRET, other))).status).toBe(401);
    const now = Math.floor(Date.now() / 1000);
    const stale = await post(body, signSlackRequest(SECRET, body, now - 10 * 60));
    expect(stale.status).toBe(401);
    const unsigned = await post(body, {});
    expect(unsigned.status).toBe(401);
    // Every refusal was answered before anything could be handed on: the next message is the first taken.
    await takesMarker();
    expect(rig.inbound.map((m) => m.content)).toEqual(["marker"]);
  });

  it("refuses a body over 4 MB with 413 without reading it, taking nothing", async () => {
    const body = JSON.stringify({ padding: "x".repeat(4 * 1024 * 1024 + 1) });
    const res = await post(body, signSlackRequest(SECRET, body));
    expect(res.status).toBe(413);
    // Sent in chunks without a length: refused once the limit is passed.
    const chunk = new TextEncoder().encode("x".repeat(256 * 1024));
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent++ < 20) controller.enqueue(chunk);
        else controller.close();
      },
    });
    const chunked = await fetch(url, {
      method: "POST",
      body: stream,
      headers: { "content-type": "application/json", ...signSlackRequest(SECRET, "") },
      duplex: "half",
    });
    expect(chunked.status).toBe(413);
    await takesMarker();
    expect(rig.inbound.map((m) => m.content)).toEqual(["marker"]);
  });

  it("answers 400 to a signed body that is not JSON, 404 elsewhere and to other methods", async () => {
    const body = "{not json";
    expect((await post(body, signSlackRequest(SECRET, body))).status).toBe(400);
    const elsewhere = await fetch(url.replace("/hooks/slack", "/slack/events"), {
      method: "POST",
      body,
      headers: signSlackRequest(SECRET, body),
    });
    expect(elsewhere.status).toBe(404);
    expect((await fetch(url)).status).toBe(404);
  });

  it("answers Slack's unsigned ssl_check with 200 and takes nothing from it", async () => {
    const body = new URLSearchParams({
      ssl_check: "1",
      token: "t",
      command: "/palaver",
      text: "stop",
    }).toString();
    const res = await post(body, {}, "application/x-www-form-urlencoded");
    expect(res.status).toBe(200);
    await takesMarker();
    expect(rig.inbound.map((m) => m.content)).toEqual(["marker"]);
  });

  it("takes an event Slack sends again (x-slack-retry-num) once", async () => {
    const body = eventBody(dmEvent("only once"));
    expect((await post(body, signSlackRequest(SECRET, body))).status).toBe(200);
    await rig.nextInbound(1);
    const retry = {
      ...signSlackRequest(SECRET, body),
      "x-slack-retry-num": "1",
      "x-slack-retry-reason": "http_timeout",
    };
    expect((await post(body, retry)).status).toBe(200);
    await takesMarker(2);
    expect(rig.inbound.map((m) => m.content)).toEqual(["only once", "marker"]);
  });

  it("acknowledges interactions that are not button presses and ignores them", async () => {
    const body = new URLSearchParams({
      payload: JSON.stringify({ type: "view_submission", user: { id: "U1" }, view: { id: "V1" } }),
    }).toString();
    const res = await post(body, signSlackRequest(SECRET, body), "application/x-www-form-urlencoded");
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("");
  });

  it("takes a signed /palaver slash command (form encoded)", async () => {
    const body = new URLSearchParams({
      command: "/palaver",
      text: "status",
      user_id: "U1",
      user_name: "alice",
      channel_id: "D1",
      channel_name: "directmessage",
      team_id: TEAM_ID,
      response_url: "http://127.0.0.1:9/never",
      trigger_id: "t1",
    }).toString();
    const res = await post(body, signSlackRequest(SECRET, body), "application/x-www-form-urlencoded");
    expect(res.status).toBe(200);
    expect(await rig.nextInbound(1)).toMatchObject({
      content: "/status",
      chatId: "D1",
      sessionKey: "slack:D1",
    });
  });

  it("stops listening on stop", async () => {
    await rig.channel.stop();
    await expect(fetch(url, { method: "POST", body: "{}" })).rejects.toThrow();
  });
});
