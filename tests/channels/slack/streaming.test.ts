/**
 * Streamed replies on Slack: the real adapter's preview surface, driven by the one streaming engine
 * (LivePreview), against the fake Slack with its per-message chat.update rate limit. What the
 * contract suite does not see: Slack's 429s on updates (the backlog coalesced, the final edit
 * never dropped), threads, the receipt reaction, and preview text that must not become markup.
 */
import { afterEach, describe, expect, it } from "vitest";
import { replyPlaceOf, type InboundMessage } from "../../../src/bus/types.js";
import { LivePreview } from "../../../src/channels/live-preview.js";
import { formatSlackMessage, SLACK_MESSAGE_LIMIT } from "../../../src/channels/slack/format.js";
import { SLACK_PREVIEW_INTERVAL_MS } from "../../../src/channels/slack/preview.js";
import { BOT_USER_ID, channelMessage, dmEvent, mentionEvent } from "../../fakes/slack-server.js";
import { waitFor } from "../../helpers/wait.js";
import { slackRig, turnOf, type SlackRig } from "./helpers.js";

let rig: SlackRig | undefined;

afterEach(async () => {
  await rig?.cleanup();
  rig = undefined;
});

/** A started rig and the message the streamed reply answers. */
async function started(event = dmEvent("tell me")): Promise<{ rig: SlackRig; msg: InboundMessage }> {
  rig = await slackRig();
  await rig.start();
  await rig.fake.pushEvent(event);
  if (event.channel_type === "channel") await rig.fake.pushEvent(mentionEvent(event));
  return { rig, msg: await rig.nextInbound(1) };
}

/** The engine over the adapter's surface for one turn, updating as fast as it is let. */
function previewOf(r: SlackRig, msg: InboundMessage, turnId = "t1"): LivePreview {
  const surface = r.channel.previewSurface({
    chatId: msg.chatId,
    turnId,
    threadId: msg.threadId,
    metadata: msg.metadata ?? {},
  });
  if (!surface) throw new Error("no preview surface");
  return new LivePreview(surface, { intervalMs: 0 });
}

/** Every text the message at `ts` showed, in order. */
const historyOf = (r: SlackRig, ts: string) => r.fake.shown.filter((s) => s.ts === ts);

const counting = (n: number) => `Counting:${Array.from({ length: n + 1 }, (_, i) => ` ${i}`).join("")}`;

describe("Slack streamed replies", () => {
  it("is offered only while the channel runs, at Slack's pace for chat.update", async () => {
    rig = await slackRig();
    expect(rig.channel.previewSurface({ chatId: "D1", turnId: "t0" })).toBeUndefined();
    await rig.start();
    const surface = rig.channel.previewSurface({ chatId: "D1", turnId: "t0" });
    expect(surface).toMatchObject({ maxChars: SLACK_MESSAGE_LIMIT, intervalMs: SLACK_PREVIEW_INTERVAL_MS });
  });

  it("a 429 on an update waits Retry-After, then sends only the newest text: no queue of stale edits", async () => {
    const { rig: r, msg } = await started();
    r.fake.minUpdateIntervalMs = 2000;
    const preview = previewOf(r, msg);
    // The first text is posted; everything after it while the post is out waits for one update,
    // which comes right after the post and so is refused with a 429.
    for (let i = 0; i <= 30; i++) preview.update(counting(i));
    await waitFor(() => r.fake.updatesLimited === 1, undefined, "the first update rate-limited");
    // More text during the wait Slack asked for: it joins the one update that follows it.
    for (let i = 31; i <= 60; i++) preview.update(counting(i));
    await waitFor(() => r.fake.shown.some((s) => s.text === counting(60)), undefined, "the newest text");

    const ts = r.fake.botMessages()[0]!.message.ts;
    expect(historyOf(r, ts).map((s) => [s.how, s.text])).toEqual([
      ["post", counting(0)],
      ["update", counting(60)],
    ]);
    expect(r.fake.callsTo("chat.update")).toHaveLength(2); // the refused one and the newest text
    expect(r.fake.earlyRetries).toEqual([]); // the wait lasted the Retry-After
    expect(await preview.finish(`${counting(60)} **done**`)).toBe(true);
    expect(r.fake.botMessages().map((m) => m.message.text)).toEqual(
      formatSlackMessage(`${counting(60)} **done**`),
    );
  });

  it("the final edit is never dropped: a 429 on it is waited out and it lands in place", async () => {
    const { rig: r, msg } = await started();
    r.fake.minUpdateIntervalMs = 2000;
    const preview = previewOf(r, msg);
    preview.update("The answer");
    // The final comes while the first post is still out: its update follows the post at once.
    const finished = preview.finish("The answer is **42**.");
    await waitFor(() => r.fake.updatesLimited >= 1, undefined, "the final update rate-limited");
    expect(await finished).toBe(true);
    expect(r.fake.callsTo("chat.postMessage")).toHaveLength(1);
    expect(r.fake.botMessages().map((m) => m.message.text)).toEqual(["The answer is *42*."]);
    expect(r.fake.shown.at(-1)).toMatchObject({ how: "update", text: "The answer is *42*." });
    expect(r.fake.earlyRetries).toEqual([]);
  });

  it("in a channel thread: every post of a long reply stays in the thread, finalized in place", async () => {
    const mention = channelMessage(`<@${BOT_USER_ID}> write a lot`);
    const { rig: r, msg } = await started(mention);
    const preview = previewOf(r, msg);
    const word = "stream ";
    const long = word.repeat(Math.ceil((SLACK_MESSAGE_LIMIT * 1.5) / word.length)).trim();
    for (let n = 1000; n < long.length; n += 1000) preview.update(long.slice(0, n));
    preview.update(long);
    await waitFor(() => r.fake.botMessages().length === 2, undefined, "the continuation");
    expect(await preview.finish(long)).toBe(true);

    expect(r.fake.posted().map((p) => [p.channel, p.thread_ts])).toEqual([
      ["C1", String(mention.ts)],
      ["C1", String(mention.ts)],
    ]);
    expect(r.fake.botMessages().map((m) => m.message.text)).toEqual(formatSlackMessage(long));
  });

  it("the receipt reaction ends when the first text shows, not again at the end of the turn", async () => {
    const { rig: r, msg } = await started();
    const key = `D1:${String(msg.messageId)}`;
    r.channel.onTurn(turnOf("turnStart", msg, "t1"));
    await waitFor(() => r.fake.reactions.get(key)?.has("eyes") ?? false, undefined, "the receipt");
    const preview = previewOf(r, msg, "t1");
    preview.update("Thinking out loud");
    await waitFor(() => r.fake.reactions.get(key)?.has("white_check_mark") ?? false, undefined, "the swap");
    expect([...r.fake.reactions.get(key)!]).toEqual(["white_check_mark"]);
    expect(await preview.finish("Thinking out loud, done.")).toBe(true);
    r.channel.onTurn(turnOf("turnEnd", msg, "t1"));
    // A reply posted after the turn's end: a reaction call its end started would have come first.
    await r.channel.send({ channel: "slack", chatId: "D1", kind: "final", content: "later" });
    await waitFor(() => r.fake.botMessages().length === 2, undefined, "the later reply");
    expect(r.fake.callsTo("reactions.remove")).toHaveLength(1);
    expect(r.fake.callsTo("reactions.add")).toHaveLength(2);
  });

  it("preview text is plain: a half-written link or <!channel> never becomes Slack markup", async () => {
    const { rig: r, msg } = await started();
    const preview = previewOf(r, msg);
    preview.update("if a < b && c > d, tell <!channel> and see <http://x");
    await waitFor(() => r.fake.shown.length === 1, undefined, "the preview");
    expect(r.fake.shown[0]!.text).toBe(
      "if a &lt; b &amp;&amp; c &gt; d, tell &lt;!channel&gt; and see &lt;http://x",
    );
    const final = "if a < b && c > d, tell everyone";
    expect(await preview.finish(final)).toBe(true);
    expect(r.fake.botMessages().map((m) => m.message.text)).toEqual(formatSlackMessage(final));
  });
});

describe("the plan on Slack", () => {
  it("is one message in the thread, updated in place with chat.update, and leaves the receipt on", async () => {
    const mention = channelMessage(`<@${BOT_USER_ID}> plan it`);
    const { rig: r, msg } = await started(mention);
    const key = `C1:${String(msg.messageId)}`;
    r.channel.onTurn(turnOf("turnStart", msg, "t1"));
    await waitFor(() => r.fake.reactions.get(key)?.has("eyes") ?? false, undefined, "the receipt");
    const surface = r.channel.planSurface({
      chatId: msg.chatId,
      turnId: "t1",
      ...replyPlaceOf(msg),
      metadata: msg.metadata ?? {},
    });
    if (!surface) throw new Error("no plan surface");
    const plan = new LivePreview(surface, { intervalMs: 0 });
    const states = ["▶ Fetch\n☐ Sum", "☑ Fetch\n▶ Sum"];
    for (const state of states) {
      plan.update(state);
      await waitFor(() => r.fake.shown.some((s) => s.text === state), undefined, `"${state}" shown`);
    }
    expect(await plan.finish("☑ Fetch\n☑ Sum")).toBe(true);

    const [only] = r.fake.botMessages();
    expect(r.fake.botMessages()).toHaveLength(1);
    expect(r.fake.posted().map((p) => [p.channel, p.thread_ts])).toEqual([["C1", String(mention.ts)]]);
    expect(historyOf(r, only!.message.ts).map((s) => [s.how, s.text])).toEqual([
      ["post", states[0]],
      ["update", states[1]],
      ["update", "☑ Fetch\n☑ Sum"],
    ]);
    // The turn is still at work: the checklist does not end the receipt as a reply's first text does.
    expect([...r.fake.reactions.get(key)!]).toEqual(["eyes"]);
  });
});
