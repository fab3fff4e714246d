/**
 * A crash mid-stream on Slack (Socket Mode) and Discord (issue 15 item 4; crash-stream.test.ts does
 * the same for Telegram): the real `palaver gateway` as a child process streams an answer into a
 * direct message (a posted message, then edited) and is SIGKILLed while the preview is half written.
 * The restart answers exactly once from the journal, and the stale preview is rewritten to say it
 * was interrupted instead of looking like an answer forever (both platforms let a bot edit its own
 * messages).
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { INTERRUPTED_NOTE } from "../../src/channels/interrupted-previews.js";
import { FakeDiscord, type FakeUser } from "../fakes/discord-server.js";
import { lastUserText, type FakeReply } from "../fakes/openai-server.js";
import { dmEvent, FakeSlack } from "../fakes/slack-server.js";
import { GatewayHarness, writeGatewayConfig, type GatewayFakes } from "../helpers/gateway-process.js";
import { waitFor } from "../helpers/wait.js";

const harness = new GatewayHarness({
  prefix: "palaver-crash-stream-platforms-",
  telegram: false,
  startupMs: 45_000,
});
const WAIT_MS = 60_000;

/** Plain words: the formatted final is the same text on both platforms, so it is compared as shown. */
const ANSWER = Array.from({ length: 40 }, (_, i) => `word${i}`).join(" ");

/**
 * The model: slow on the first run, so the process dies with the preview half written (about 12 s
 * for the whole answer, far beyond the preview's first edit); at once after the restart.
 */
let slow = true;

beforeEach(async () => {
  await harness.start();
  slow = true;
  harness.llm.setHandler((req): FakeReply => {
    if (lastUserText(req) === "marker") return { content: "re: marker" };
    return slow ? { content: ANSWER, pieceChars: 5, pieceDelayMs: 200 } : { content: ANSWER };
  });
});
afterEach(() => harness.close());

/** Writes a config streaming on the given platform's fake (its own default edit interval). */
async function streamingConfig(fakes: Omit<GatewayFakes, "llmBaseURL">): Promise<void> {
  harness.configPath = await writeGatewayConfig(
    harness.dir,
    { llmBaseURL: harness.llm.baseURL, ...fakes },
    { channels: { streaming: true } },
  );
}

describe("a crash mid-stream: Slack (Socket Mode)", { timeout: 180_000 }, () => {
  let slack: FakeSlack;
  beforeEach(async () => {
    slack = await FakeSlack.start({ ackTimeoutMs: WAIT_MS });
    harness.onClose(() => slack.close());
    await streamingConfig({ slack });
  });

  /** A new Socket Mode connection is open (the previous process's socket is gone). */
  const start = () => {
    const before = slack.connections;
    return harness.startGatewayWhen(() => slack.connections > before && slack.connected);
  };
  /** dmEvent's chat: U1's direct message with the bot. */
  const DM = "D1";
  /** The bot's messages in the DM as Slack shows them now (edits applied), in the order posted. */
  const inDm = () =>
    slack
      .botMessages()
      .filter((m) => m.channel === DM)
      .map((m) => ({ ts: m.message.ts, text: slack.shownText(m.message) }));

  it("SIGKILL while the preview grows, then a restart: one final with the full answer, the preview marked interrupted", async () => {
    const first = await start();
    await slack.pushEvent(dmEvent("tell me"));
    // Updated once: the preview was journaled as soon as its chat.postMessage returned.
    await waitFor(
      () => slack.shown.some((s) => s.channel === DM && s.how === "update" && s.text.startsWith("word0")),
      WAIT_MS,
      "the preview's first chat.update",
    );
    await harness.kill(first);
    const stale = inDm();
    expect(stale).toHaveLength(1);
    expect(stale[0]!.text).not.toBe(ANSWER); // half written when the process died
    const staleTs = stale[0]!.ts;

    slow = false;
    await start();
    await waitFor(
      () => inDm().find((m) => m.ts === staleTs)?.text === INTERRUPTED_NOTE,
      WAIT_MS,
      "the stale preview marked interrupted",
    );
    await waitFor(
      () => inDm().some((m) => m.ts !== staleTs && m.text === ANSWER),
      WAIT_MS,
      "the full answer",
    );
    // Same chat, handled in order: once this is answered, nothing of the replayed turn is still coming.
    await slack.pushEvent(dmEvent("marker"));
    await waitFor(() => inDm().some((m) => m.text === "re: marker"), WAIT_MS, "the marker's reply");

    expect(inDm().map((m) => m.text)).toEqual([INTERRUPTED_NOTE, ANSWER, "re: marker"]);
    expect(harness.llm.requests.map(lastUserText)).toEqual(["tell me", "tell me", "marker"]);
  });
});

describe("a crash mid-stream: Discord", { timeout: 180_000 }, () => {
  let discord: FakeDiscord;
  let alice: FakeUser;
  let dmId: string;
  beforeEach(async () => {
    discord = await FakeDiscord.start();
    harness.onClose(() => discord.close());
    alice = discord.addUser("alice");
    dmId = discord.dmChannel(alice).id;
    await streamingConfig({ discord });
  });

  /** A new gateway session is live (Discord never resumes the killed process's session). */
  const start = () => {
    const before = discord.identifies;
    return harness.startGatewayWhen(() => discord.identifies > before && discord.liveConnection !== null);
  };
  /** The bot's messages in the DM as Discord shows them now (edits applied), in the order posted. */
  const inDm = () => discord.botMessages().filter((m) => m.channel_id === dmId);

  it("SIGKILL while the preview grows, then a restart: one final with the full answer, the preview marked interrupted", async () => {
    const first = await start();
    discord.userMessage({ channelId: dmId, author: alice, content: "tell me" });
    // Edited once: the preview was journaled as soon as its post returned.
    await waitFor(
      () => discord.shown.some((s) => s.channelId === dmId && s.edit && s.content.startsWith("word0")),
      WAIT_MS,
      "the preview's first edit",
    );
    await harness.kill(first);
    const stale = inDm();
    expect(stale).toHaveLength(1);
    expect(stale[0]!.content).not.toBe(ANSWER); // half written when the process died
    const staleId = stale[0]!.id;

    slow = false;
    await start();
    await waitFor(
      () => discord.message(staleId)?.content === INTERRUPTED_NOTE,
      WAIT_MS,
      "the stale preview marked interrupted",
    );
    await waitFor(
      () => inDm().some((m) => m.id !== staleId && m.content === ANSWER),
      WAIT_MS,
      "the full answer",
    );
    // Same chat, handled in order: once this is answered, nothing of the replayed turn is still coming.
    discord.userMessage({ channelId: dmId, author: alice, content: "marker" });
    await waitFor(() => inDm().some((m) => m.content === "re: marker"), WAIT_MS, "the marker's reply");

    expect(inDm().map((m) => m.content)).toEqual([INTERRUPTED_NOTE, ANSWER, "re: marker"]);
    expect(harness.llm.requests.map(lastUserText)).toEqual(["tell me", "tell me", "marker"]);
  });
});
