/**
 * End to end: the Gateway (manager, agent loop, sessions) with the real Slack
 * adapter against the fake Slack, and the LLM as the loopback FakeOpenAI.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { lastUserText, type FakeOpenAI } from "../../fakes/openai-server.js";
import { BOT_USER_ID, channelMessage, dmEvent, type FakeSlack } from "../../fakes/slack-server.js";
import { SlackGatewayRig } from "./helpers.js";
import { MIN_WAIT_MS, waitFor } from "../../helpers/wait.js";

let rig: SlackGatewayRig;
let dir: string;
let llm: FakeOpenAI;
let slack: FakeSlack;

beforeEach(async () => {
  rig = await SlackGatewayRig.create("palaver-slack-e2e-");
  ({ dir, llm, slack } = rig);
  await rig.start();
  await slack.waitForConnections(1);
});

afterEach(() => rig.close());

/** Waits until the fake has seen a post matching `pred`, and returns it. */
async function postMatching(pred: (p: { channel: string; text: string; thread_ts?: string }) => boolean) {
  await waitFor(() => slack.posted().some(pred), MIN_WAIT_MS, "the post");
  return slack.posted().find(pred)!;
}

describe("Slack end to end", () => {
  it("acknowledges an event at once while the model takes its time (Slack sends nothing again)", async () => {
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    llm.setHandler(async (req) => {
      await held;
      return { content: `re: ${lastUserText(req)}` };
    });
    try {
      await slack.pushEvent(dmEvent("take your time"));
      await waitFor(() => llm.requests.length === 1, MIN_WAIT_MS, "the turn to reach the model");
      // Acknowledged while the turn is held: without an ack within 3 s the fake sends it again.
      expect(slack.socketRetries).toBe(0);
    } finally {
      release();
    }
    await postMatching((p) => p.channel === "D1");
    expect(slack.posted().filter((p) => p.channel === "D1")).toEqual([
      { channel: "D1", text: "re: take your time" },
    ]);
  });

  it("answers a DM in the DM and marks the message done", async () => {
    llm.setHandler((req) => ({ content: `You said **${lastUserText(req)}**` }));
    const event = dmEvent("hello");
    await slack.pushEvent(event);
    const reply = await postMatching((p) => p.channel === "D1");
    expect(reply).toEqual({ channel: "D1", text: "You said *hello*" });
    await slack.waitForCalls("reactions.remove", 1);
    await slack.waitForCalls("reactions.add", 2);
    expect([...(slack.reactions.get(`D1:${String(event.ts)}`) ?? [])]).toEqual(["white_check_mark"]);
    const session = await readFile(join(dir, "ws", "sessions", "slack_D1.jsonl"), "utf8");
    expect(session).toContain("You said **hello**");
  });

  it("answers a channel mention in its thread, and the thread is one conversation", async () => {
    llm.setHandler((req) => ({ content: `re: ${lastUserText(req)}` }));
    await slack.pushEvent(channelMessage("people talking")); // no mention: not for the bot
    const mention = channelMessage(`<@${BOT_USER_ID}> first question`);
    await slack.pushEvent(mention);
    const ts = String(mention.ts);
    expect(await postMatching((p) => p.text === "re: first question")).toEqual({
      channel: "C1",
      text: "re: first question",
      thread_ts: ts,
    });
    await slack.pushEvent(channelMessage("second question", { thread_ts: ts }));
    expect(await postMatching((p) => p.text === "re: second question")).toMatchObject({ thread_ts: ts });

    expect(llm.requests).toHaveLength(2);
    const history = JSON.stringify(llm.requests[1]!.body.messages);
    expect(history).toContain("first question");
    expect(history).not.toContain("people talking");
    const session = await readFile(join(dir, "ws", "sessions", `slack_C1_${ts}.jsonl`), "utf8");
    expect(session).toContain("re: second question");
  });

  it("tells a refused sender its id once", async () => {
    await slack.pushEvent(dmEvent("let me in", { user: "U2", channel: "D2" }));
    await slack.pushEvent(dmEvent("please", { user: "U2", channel: "D2" }));
    const notice = await postMatching((p) => p.channel === "D2");
    expect(notice.text).toContain("Your slack user id is U2");
    expect(notice.text).toContain("channels.slack.allowFrom");
    // A barrier in the same conversation: the receiver hands one channel's events on in arrival order
    // and the sender is judged as they are handed on, so once U1's message after them is answered,
    // both of U2's were judged. (A real DM holds only U2; the fake lets U1 speak there for this.)
    llm.setHandler((req) => ({ content: `re: ${lastUserText(req)}` }));
    await slack.pushEvent(dmEvent("marker", { user: "U1", channel: "D2" }));
    await postMatching((p) => p.text === "re: marker");
    expect(slack.posted().filter((p) => p.channel === "D2")).toEqual([
      notice,
      { channel: "D2", text: "re: marker" },
    ]);
    expect(llm.requests.map(lastUserText)).toEqual(["marker"]);
  });

  it("/palaver stop cancels a slow turn in the user's thread and answers there", async () => {
    llm.setHandler(() => ({ content: "too late", delayMs: 120_000 })); // only the stop can end it
    const mention = channelMessage(`<@${BOT_USER_ID}> do something slow`);
    await slack.pushEvent(mention);
    await waitFor(() => llm.requests.length === 1);
    await slack.pushCommand({ text: "stop", user_id: "U1", channel_id: "C1" });
    const stopped = await postMatching((p) => p.text.startsWith("Stopped"));
    expect(stopped).toEqual({
      channel: "C1",
      text: "Stopped the running reply.",
      thread_ts: String(mention.ts),
    });
    // The thread's next answer comes only after the stopped turn ended: it said nothing.
    llm.setHandler(() => ({ content: "after the stop" }));
    await slack.pushEvent(channelMessage(`<@${BOT_USER_ID}> still there?`, { thread_ts: mention.ts }));
    await postMatching((p) => p.text === "after the stop");
    expect(slack.posted().some((p) => p.text === "too late")).toBe(false);
  });

  it("`@palaver stop` in the thread cancels the slow turn too", async () => {
    llm.setHandler(() => ({ content: "too late", delayMs: 120_000 })); // only the stop can end it
    const mention = channelMessage(`<@${BOT_USER_ID}> do something slow`);
    await slack.pushEvent(mention);
    await waitFor(() => llm.requests.length === 1);
    await slack.pushEvent(channelMessage(`<@${BOT_USER_ID}> stop`, { thread_ts: mention.ts }));
    const stopped = await postMatching((p) => p.text.startsWith("Stopped"));
    expect(stopped.thread_ts).toBe(String(mention.ts));
  });

  it("splits a long answer into several messages in order", async () => {
    const long = Array.from({ length: 500 }, (_v, i) => `Paragraph ${i}: ${"lorem ipsum ".repeat(4)}`).join(
      "\n\n",
    );
    llm.setHandler(() => ({ content: long }));
    await slack.pushEvent(dmEvent("tell me everything"));
    await postMatching((p) => p.text.includes("Paragraph 499"));
    const texts = slack.posted().map((p) => p.text);
    expect(texts.length).toBeGreaterThan(5);
    expect(texts[0]!.startsWith("Paragraph 0:")).toBe(true);
    const joined = texts.join("\n\n");
    for (let i = 0; i < 500; i += 50)
      expect(joined.indexOf(`Paragraph ${i}:`)).toBeLessThan(joined.indexOf(`Paragraph ${i + 1}:`));
  });
});
