/**
 * The Slack secrets never reach a log line: Bolt, its Socket Mode and Web API clients log at debug
 * through the channel's logger (request URLs, headers, payloads), and the channel logs failures
 * with their errors. Captured from a pino logger that redacts nothing itself.
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { dmEvent, signSlackRequest, TEAM_ID, BOT_USER_ID } from "../../fakes/slack-server.js";
import { slackRig, type SlackRig } from "./helpers.js";

const SECRET = "fake-signing-secret-0123456789abcdef";

let rig: SlackRig | undefined;
afterEach(async () => {
  await rig?.cleanup();
  rig = undefined;
});

/** A debug logger writing every line to `lines`, nothing redacted by pino itself. */
function capturing(lines: string[]) {
  return pino({ level: "debug" }, { write: (line: string) => void lines.push(line) });
}

function expectNoSecrets(lines: string[], secrets: string[]): void {
  const all = lines.join("");
  // The capture is not empty: Bolt and the clients did log at debug.
  expect(lines.length).toBeGreaterThan(10);
  for (const secret of secrets) expect(all).not.toContain(secret);
}

describe("Slack logs", () => {
  it("Socket Mode at debug: connect, an event, a reply, an upload and failed calls log no token", async () => {
    const lines: string[] = [];
    rig = await slackRig({}, { log: capturing(lines) });
    const { fake, channel, workspace } = rig;
    await rig.start();
    await fake.waitForConnections(1);
    await fake.pushEvent(dmEvent("hello"));
    const msg = await rig.nextInbound(1);
    await channel.send({ channel: "slack", chatId: "D1", content: "hi!", metadata: msg.metadata });
    const path = join(workspace, "chart.png");
    await writeFile(path, Buffer.from([1, 2, 3]));
    await channel.send({ channel: "slack", chatId: "D1", content: "a file", media: [path] });
    fake.failNext("chat.postMessage", "not_in_channel");
    await expect(channel.send({ channel: "slack", chatId: "C5", content: "no" })).rejects.toThrow();
    fake.rateLimit("chat.postMessage", 120);
    await expect(channel.send({ channel: "slack", chatId: "D1", content: "later" })).rejects.toThrow();
    await fake.closeSocket("close");
    await fake.waitForConnections(2);
    expectNoSecrets(lines, [fake.botToken, fake.appToken]);
  });

  it("HTTP mode at debug: signed, forged and unsigned requests log neither the token nor the signing secret", async () => {
    const lines: string[] = [];
    rig = await slackRig(
      { mode: "http", appToken: "", signingSecret: SECRET, port: 0 },
      { log: capturing(lines), tuning: { httpHost: "127.0.0.1" } },
    );
    await rig.start();
    const url = `http://127.0.0.1:${rig.channel.address!.port}/slack/events`;
    const body = JSON.stringify({
      type: "event_callback",
      team_id: TEAM_ID,
      event_id: "Ev1",
      event: dmEvent("over http"),
      authorizations: [{ team_id: TEAM_ID, user_id: BOT_USER_ID, is_bot: true }],
    });
    const post = (headers: Record<string, string>) =>
      fetch(url, { method: "POST", body, headers: { "content-type": "application/json", ...headers } });
    expect((await post({ ...signSlackRequest(SECRET, body), "x-slack-signature": "v0=00" })).status).toBe(
      401,
    );
    expect((await post({})).status).toBe(401);
    expect((await post(signSlackRequest(SECRET, body))).status).toBe(200);
    const msg = await rig.nextInbound(1);
    await rig.channel.send({ channel: "slack", chatId: "D1", content: "hi!", metadata: msg.metadata });
    expectNoSecrets(lines, [rig.fake.botToken, SECRET]);
  });
});
