/** HTTP Events API mode: Bolt's receiver verifies Slack's request signatures; replies go out by the Web API. */
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
    expect(await res.text()).toContain("abc123");
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
    const wrongSecret = await post(body, signSlackRequest("not-the-secret", body));
    expect(wrongSecret.status).toBe(401);
    const stale = await post(body, signSlackRequest(SECRET, body, Math.floor(Date.now() / 1000) - 10 * 60));
    expect(stale.status).toBe(401);
    const unsigned = await post(body, {});
    expect(unsigned.status).toBe(401);
    await new Promise((r) => setTimeout(r, 100));
    expect(rig.inbound).toHaveLength(0);
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
