/**
 * Exactly once across a SIGKILL on Slack (Socket Mode) and Discord: the real
 * `palaver gateway` as a child process against the loopback fakes, killed and
 * started again over the same state folder (crash.test.ts does the same for
 * Telegram). Neither platform redelivers an event palaver acknowledged
 * (Discord never redelivers at all), so what the next start answers comes
 * from the journal; a late redelivery of the same message (a Slack retry) must
 * still be ignored.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FakeDiscord, type FakeUser } from "../fakes/discord-server.js";
import { lastUserText, type FakeOpenAI, type FakeReply } from "../fakes/openai-server.js";
import { dmEvent, FakeSlack, type TestEvent } from "../fakes/slack-server.js";
import type { RunningCli } from "../helpers/cli.js";
import { GatewayHarness, writeGatewayConfig, type GatewayFakes } from "../helpers/gateway-process.js";
import { waitFor } from "../helpers/wait.js";

/**
 * Temp folder, FakeOpenAI and gateway children (killed after each test): see
 * GatewayHarness. No FakeTelegram: each test starts its platform's fake.
 */
const harness = new GatewayHarness({
  prefix: "palaver-crash-platforms-",
  telegram: false,
  startupMs: 45_000,
});
const WAIT_MS = 20_000;

let dir: string;
let llm: FakeOpenAI;

beforeEach(async () => {
  await harness.start();
  ({ dir, llm } = harness);
});

afterEach(() => harness.close());

const startGateway = (connected: () => boolean) => harness.startGatewayWhen(connected);
const kill = (run: RunningCli) => harness.kill(run);

/** Echoes the user; a `slow` one waits (until the client disconnects, when killed). */
function echo(opts: { delayMs?: number } = {}): (req: Parameters<typeof lastUserText>[0]) => FakeReply {
  return (req) => ({
    content: `re: ${lastUserText(req)}`,
    ...(opts.delayMs ? { delayMs: opts.delayMs } : {}),
  });
}

const llmAsked = (text: string) => llm.requests.filter((r) => lastUserText(r) === text);

interface JournalEntry {
  t: string;
  id?: string;
  msg?: { content?: string };
}

async function journal(): Promise<JournalEntry[]> {
  const text = await readFile(join(dir, "journal", "messages.jsonl"), "utf8").catch(() => "");
  return text
    .split("\n")
    .filter(Boolean)
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as JournalEntry];
      } catch {
        return []; // a line being written right now
      }
    });
}

/**
 * The turn is over and its reply waits in the outbox: every inbound message
 * is done and a reply with `content` is recorded but not sent. Killing the
 * process now must neither run the turn again nor lose the reply.
 */
async function replyOnlyInOutbox(content: string): Promise<boolean> {
  const entries = await journal();
  const closed = (id: string | undefined, ends: string[]) =>
    entries.some((e) => ends.includes(e.t) && e.id === id);
  const openIn = entries.filter((e) => e.t === "in" && !closed(e.id, ["done"]));
  const openOut = entries.filter(
    (e) => e.t === "out" && e.msg?.content === content && !closed(e.id, ["sent", "dropped"]),
  );
  return openIn.length === 0 && openOut.length === 1;
}

describe("exactly once across a SIGKILL: Slack (Socket Mode)", { timeout: 180_000 }, () => {
  let slack: FakeSlack;
  beforeEach(async () => {
    slack = await FakeSlack.start({ ackTimeoutMs: WAIT_MS });
    harness.onClose(() => slack.close());
    const fakes: GatewayFakes = { llmBaseURL: llm.baseURL, slack };
    harness.configPath = await writeGatewayConfig(dir, fakes);
  });

  /** A new Socket Mode connection is open (the previous process's socket is gone). */
  const start = () => {
    const before = slack.connections;
    return startGateway(() => slack.connections > before && slack.connected);
  };
  const postsOf = (text: string) => slack.posted().filter((p) => p.text === text);
  /** Pushes an event and waits for palaver's Socket Mode ack. */
  const push = (event: TestEvent) => slack.pushEvent(event);
  const waitUntilPosted = (text: string) =>
    waitFor(() => postsOf(text).length > 0, WAIT_MS, `"${text}" posted to Slack`);

  it("SIGKILL mid-turn, then a restart: answered once from the journal, Slack's retry ignored", async () => {
    llm.setHandler(echo({ delayMs: 120_000 }));
    const first = await start();
    const hello = dmEvent("hello");
    await push(hello); // acknowledged: Slack will not send it again by itself
    await waitFor(() => llmAsked("hello").length === 1, WAIT_MS, "the LLM request");
    await kill(first);
    expect(postsOf("re: hello")).toEqual([]);

    llm.setHandler(echo());
    await start();
    await waitUntilPosted("re: hello");
    // Slack retries an event it thinks was lost (a new envelope, the same message): already answered.
    await push({ ...hello });
    // Same chat, handled in order: once this is answered, the retry has been dealt with.
    await push(dmEvent("marker"));
    await waitUntilPosted("re: marker");

    expect(postsOf("re: hello")).toHaveLength(1);
    expect(llmAsked("hello")).toHaveLength(2); // the one cut off and the one answered
    expect(llmAsked("marker")).toHaveLength(1);
  });

  it("SIGKILL while Slack rate-limits the reply, then a restart: delivered once, LLM not asked again", async () => {
    llm.setHandler(echo());
    // Retry-After beyond the test: the outbox waits it out (within its retry window) until the kill.
    slack.rateLimit("chat.postMessage", 120);
    const first = await start();
    await push(dmEvent("ping"));
    await slack.waitForCalls("chat.postMessage", 1, WAIT_MS);
    await waitFor(() => replyOnlyInOutbox("re: ping"), WAIT_MS, "the turn done, its reply in the outbox");
    await kill(first);
    expect(postsOf("re: ping")).toHaveLength(1); // the refused attempt, recorded by the fake
    expect(llm.requests).toHaveLength(1);

    // The 120 s pass while the gateway is down (Slack would refuse a send before then).
    slack.endRateLimits();
    await start(); // the rate limit was used up: the outbox replays
    await push(dmEvent("marker"));
    await waitUntilPosted("re: marker");

    // Two calls for "re: ping": the one refused with 429 and the one that went through.
    expect(postsOf("re: ping")).toHaveLength(2);
    expect(llmAsked("ping")).toHaveLength(1);
    expect(llm.requests.map(lastUserText)).toEqual(["ping", "marker"]);
  });
});

describe("exactly once across a SIGKILL: Discord", { timeout: 180_000 }, () => {
  let discord: FakeDiscord;
  let alice: FakeUser;
  let dmId: string;
  beforeEach(async () => {
    discord = await FakeDiscord.start();
    harness.onClose(() => discord.close());
    alice = discord.addUser("alice");
    dmId = discord.dmChannel(alice).id;
    harness.configPath = await writeGatewayConfig(dir, { llmBaseURL: llm.baseURL, discord });
  });

  /** A new gateway session is live (Discord never resumes the killed process's session). */
  const start = () => {
    const before = discord.identifies;
    return startGateway(() => discord.identifies > before && discord.liveConnection !== null);
  };
  const sentOf = (text: string) => discord.sent.filter((m) => m.channelId === dmId && m.content === text);
  const postsOf = (text: string) =>
    discord
      .calls("POST", `/channels/${dmId}/messages`)
      .filter((r) => (r.body as { content?: unknown }).content === text);
  const waitUntilSent = (text: string) => discord.waitFor(() => sentOf(text).length > 0, WAIT_MS, text);

  it("SIGKILL mid-turn, then a restart: answered once, from the journal (Discord never redelivers)", async () => {
    llm.setHandler(echo({ delayMs: 120_000 }));
    const first = await start();
    discord.userMessage({ channelId: dmId, author: alice, content: "hello" });
    await waitFor(() => llmAsked("hello").length === 1, 5000, "the LLM request");
    await kill(first);
    expect(sentOf("re: hello")).toEqual([]);

    llm.setHandler(echo());
    await start();
    await waitUntilSent("re: hello");
    // Same chat, handled in order: once this is answered, the replayed turn has gone out.
    discord.userMessage({ channelId: dmId, author: alice, content: "marker" });
    await waitUntilSent("re: marker");

    expect(sentOf("re: hello")).toHaveLength(1);
    expect(llmAsked("hello")).toHaveLength(2); // the one cut off and the one answered
    expect(llmAsked("marker")).toHaveLength(1);
  });

  it("SIGKILL while Discord rate-limits the reply, then a restart: delivered once, LLM not asked again", async () => {
    llm.setHandler(echo());
    // retry_after beyond the test: the outbox waits it out (within its retry window) until the kill.
    discord.rateLimitNext({ method: "POST", path: /^\/channels\/\d+\/messages$/, retryAfter: 120 });
    const first = await start();
    discord.userMessage({ channelId: dmId, author: alice, content: "ping" });
    await discord.waitFor(() => postsOf("re: ping").length === 1, WAIT_MS, "the rate-limited send");
    await waitFor(() => replyOnlyInOutbox("re: ping"), WAIT_MS, "the turn done, its reply in the outbox");
    await kill(first);
    expect(sentOf("re: ping")).toEqual([]);
    expect(llm.requests).toHaveLength(1);

    // The 120 s pass while the gateway is down (Discord would refuse a send before then).
    discord.endRateLimits();
    await start();
    await waitUntilSent("re: ping");
    discord.userMessage({ channelId: dmId, author: alice, content: "marker" });
    await waitUntilSent("re: marker");

    expect(sentOf("re: ping")).toHaveLength(1);
    expect(llmAsked("ping")).toHaveLength(1);
    expect(llm.requests.map(lastUserText)).toEqual(["ping", "marker"]);
  });
});
