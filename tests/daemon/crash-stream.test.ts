/**
 * A crash mid-stream (issue 15 item 4): the real `palaver gateway` as a child process streams an
 * answer into a Telegram group (an edited message) and is SIGKILLed while the preview is half
 * written. The restart answers exactly once, and the stale preview says it was interrupted
 * instead of looking like an answer forever.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { INTERRUPTED_NOTE } from "../../src/channels/interrupted-previews.js";
import { lastUserText, type FakeReply } from "../fakes/openai-server.js";
import { GatewayHarness, writeGatewayConfig } from "../helpers/gateway-process.js";
import { waitFor } from "../helpers/wait.js";

const harness = new GatewayHarness({ prefix: "palaver-crash-stream-" });

beforeEach(async () => {
  await harness.start();
  // A group that the bot answers without a mention: previews there are messages, edited in place.
  harness.configPath = await writeGatewayConfig(
    harness.dir,
    { llmBaseURL: harness.llm.baseURL, telegram: harness.tg },
    { channels: { streaming: true, telegram: { groupPolicy: "open" } } },
  );
});
afterEach(() => harness.close());

const GROUP = { id: -100123, type: "supergroup", title: "team" };
/** Plain words: the formatted final is the same text, so it can be compared as it is shown. */
const ANSWER = Array.from({ length: 40 }, (_, i) => `word${i}`).join(" ");

const inGroup = () => harness.tg.sent.filter((m) => String(m.chatId) === String(GROUP.id));

describe("a crash mid-stream", { timeout: 180_000 }, () => {
  it("SIGKILL while the preview grows, then a restart: one final with the full answer, the preview marked interrupted", async () => {
    const { tg, llm } = harness;
    let slow = true;
    llm.setHandler((req): FakeReply => {
      if (lastUserText(req) === "marker") return { content: "re: marker" };
      // First run: a model writing slowly, so the process dies with the preview half written.
      return slow ? { content: ANSWER, pieceChars: 5, pieceDelayMs: 200 } : { content: ANSWER };
    });

    const first = await harness.startGateway();
    tg.userMessage({ text: "tell me", chat: GROUP });
    // Edited once: the gateway has journaled the preview (it does so as soon as the post returns).
    const stale = await tg.waitForSent(
      (m) => String(m.chatId) === String(GROUP.id) && m.text?.startsWith("word0") === true && m.edits > 0,
      60_000,
    );
    await harness.kill(first);
    const staleId = stale.messageId;
    expect(stale.text).not.toBe(ANSWER); // half written when the process died

    slow = false;
    await harness.startGateway();
    await waitFor(
      () => inGroup().find((m) => m.messageId === staleId)?.text === INTERRUPTED_NOTE,
      60_000,
      "the stale preview marked interrupted",
    );
    await waitFor(
      () => inGroup().some((m) => m.messageId !== staleId && m.text === ANSWER),
      60_000,
      "the full answer",
    );
    // Same chat, handled in order: once this is answered, nothing of the replayed turn is still coming.
    tg.userMessage({ text: "marker", chat: GROUP });
    await waitFor(() => inGroup().some((m) => m.text === "re: marker"), 60_000, "the marker's reply");

    expect(inGroup().filter((m) => m.text === ANSWER)).toHaveLength(1);
    expect(inGroup().find((m) => m.messageId === staleId)?.text).toBe(INTERRUPTED_NOTE);
    // Nothing else: the interrupted preview, the answer, the marker's reply.
    expect(inGroup()).toHaveLength(3);
  });
});
