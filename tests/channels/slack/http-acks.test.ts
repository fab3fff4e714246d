/**
 * Slack's Events API over HTTP against a whole palaver (Gateway, agent loop, the real Slack adapter
 * on Bolt's HTTPReceiver, the LLM as FakeOpenAI): the fake Slack posts events to the request URL and
 * sends them again, as Slack does, when no HTTP 200 came within 3 s.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { FakeOpenAI } from "../../fakes/openai-server.js";
import { lastUserText } from "../../fakes/openai-server.js";
import { dmEvent, type FakeSlack, type HttpTarget } from "../../fakes/slack-server.js";
import { MIN_WAIT_MS, waitFor } from "../../helpers/wait.js";
import { SlackGatewayRig } from "./helpers.js";

const SECRET = "fake-signing-secret";
let rig: SlackGatewayRig;
let llm: FakeOpenAI;
let slack: FakeSlack;
let target: HttpTarget;

beforeEach(async () => {
  rig = await SlackGatewayRig.create("palaver-slack-acks-");
  ({ llm, slack } = rig);
  await rig.start({
    slack: { mode: "http", appToken: "", signingSecret: SECRET, port: 0, path: "/hooks/slack" },
    tuning: { httpHost: "127.0.0.1" },
  });
  const port = rig.channel?.address?.port;
  if (!port) throw new Error("the Slack channel is not listening");
  target = { url: `http://127.0.0.1:${port}/hooks/slack`, signingSecret: SECRET };
});

afterEach(() => rig.close());

/** The texts the bot posted to D1, in order. */
const repliesInD1 = () =>
  slack
    .delivered()
    .filter((d) => d.channel === "D1")
    .map((d) => d.text);

describe("Slack HTTP mode: acknowledgements", () => {
  it("acknowledges an event within Slack's 3 s while the model takes its time, and replies once", async () => {
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    llm.setHandler(async (req) => {
      await held;
      return { content: `re: ${lastUserText(req)}` };
    });
    try {
      const deliveries = await slack.sendEventOverHttp(target, dmEvent("take your time"));
      await waitFor(() => llm.requests.length === 1, MIN_WAIT_MS, "the turn to reach the model");
      // One delivery, answered 200 in time: no 200 within 3 s, and the fake (as Slack) sends it again.
      expect(deliveries.map((d) => [d.attempt, d.retryReason, d.status, typeof d.ackMs])).toEqual([
        [0, undefined, 200, "number"],
      ]);
    } finally {
      release();
    }
    await waitFor(() => repliesInD1().length === 1, MIN_WAIT_MS, "the reply");
    expect(repliesInD1()).toEqual(["re: take your time"]);
  });

  it("an event Slack sends again (its acknowledgement lost) is answered once", async () => {
    llm.setHandler((req) => ({ content: `re: ${lastUserText(req)}` }));
    slack.loseAcks = 1;
    slack.httpRetryDelaysMs = [0, 0, 0];
    const deliveries = await slack.sendEventOverHttp(target, dmEvent("only once"));
    expect(deliveries.map((d) => [d.attempt, d.retryReason, d.status])).toEqual([
      [0, undefined, undefined],
      [1, "http_timeout", 200],
    ]);
    // A later message answered proves the redelivery had its chance to become a second reply.
    await slack.sendEventOverHttp(target, dmEvent("marker"));
    await waitFor(() => repliesInD1().includes("re: marker"), MIN_WAIT_MS, "the marker's reply");
    expect(repliesInD1()).toEqual(["re: only once", "re: marker"]);
    expect(llm.requests.map((r) => lastUserText(r))).toEqual(["only once", "marker"]);
  });
});
