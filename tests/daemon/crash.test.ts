/**
 * Crash tests: the real `palaver gateway` as a child process (through tsx),
 * against the loopback fake Telegram and fake LLM in this process, killed and
 * started again over the same state folder. What they prove is that a
 * message is answered exactly once whatever happens to the process.
 */
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SessionStore } from "../../src/sessions/store.js";
import { lastUserText, type FakeReply } from "../fakes/openai-server.js";
import { runCli, type RunningCli } from "../helpers/cli.js";
import { GatewayHarness, writeGatewayConfig } from "../helpers/gateway-process.js";
import { waitFor } from "../helpers/wait.js";

/** Temp folder, fakes, config and gateway children (killed after each test): see GatewayHarness. */
const harness = new GatewayHarness({ prefix: "palaver-crash-" });
const CHILD_LIMIT_MS = harness.childLimitMs;

beforeEach(() => harness.start());
afterEach(() => harness.close());

const startGateway = () => harness.startGateway();
const kill = (run: RunningCli) => harness.kill(run);

/** Echoes the user; `slow` ones wait (until the client disconnects, when killed). */
function echo(opts: { delayMs?: number } = {}): (req: Parameters<typeof lastUserText>[0]) => FakeReply {
  return (req) => ({
    content: `re: ${lastUserText(req)}`,
    ...(opts.delayMs ? { delayMs: opts.delayMs } : {}),
  });
}

const repliesWith = (text: string) =>
  harness.tg.sent.filter((m) => m.method === "sendMessage" && m.text === text);
const llmAsked = (text: string) => harness.llm.requests.filter((r) => lastUserText(r) === text);

/** The session's messages as the store reads them (torn lines skipped). */
async function sessionMessages(key: string): Promise<{ role: string; content: unknown }[]> {
  const session = await new SessionStore(join(harness.dir, "ws", "sessions")).get(key);
  return session.messages.map((m) => ({ role: m.role, content: m.content }));
}

describe("palaver gateway survives being killed", { timeout: 120_000 }, () => {
  it("SIGKILL mid-turn, then a restart: the message is answered exactly once, its redelivery ignored", async () => {
    harness.llm.setHandler(echo({ delayMs: 60_000 }));
    const first = await startGateway();
    harness.tg.userMessage({ text: "hello" });
    // Telegram never hears that the update was handled: the offset does not move, so it redelivers.
    harness.tg.hangGetUpdates = true;
    await waitFor(() => harness.llm.requests.length === 1, 20_000, "the LLM request");
    await kill(first);
    expect(harness.tg.sent).toEqual([]);
    expect(harness.tg.pendingUpdates).toBe(1);

    harness.tg.hangGetUpdates = false;
    harness.tg.releaseHung();
    harness.llm.setHandler(echo());
    await startGateway();
    await harness.tg.waitForSent((m) => m.text === "re: hello", 20_000);
    await harness.tg.waitFor(
      () => harness.tg.pendingUpdates === 0,
      20_000,
      "the redelivered update to be confirmed",
    );
    // Same chat, handled in order: once this is answered, the redelivery has been dealt with.
    harness.tg.userMessage({ text: "marker" });
    await harness.tg.waitForSent((m) => m.text === "re: marker", 20_000);

    expect(repliesWith("re: hello")).toHaveLength(1);
    expect(llmAsked("hello")).toHaveLength(2); // the one cut off and the one answered
    expect(llmAsked("marker")).toHaveLength(1);
    // The cut-off turn left nothing in the session: the message is in it once.
    const messages = await sessionMessages("telegram:42");
    expect(messages.filter((m) => m.content === "hello")).toHaveLength(1);
  });

  it("SIGKILL while Telegram refuses sendMessage, then a restart: delivered once, LLM not asked again", async () => {
    harness.llm.setHandler(echo());
    // Two refusals: the first attempt and grammy's retry after 3 s; the process dies after the second.
    harness.tg.failNext("sendMessage", { code: 502, description: "Bad Gateway" }, 2);
    const first = await startGateway();
    harness.tg.userMessage({ text: "ping" });
    await harness.tg.waitFor(
      () => harness.tg.callsTo("sendMessage").length === 2,
      15_000,
      "two refused sends",
    );
    await kill(first);
    expect(harness.tg.sent).toEqual([]);
    expect(harness.llm.requests).toHaveLength(1);

    await startGateway(); // Telegram is healthy again: nothing more is scripted
    await harness.tg.waitForSent((m) => m.text === "re: ping", 20_000);
    harness.tg.userMessage({ text: "marker" });
    await harness.tg.waitForSent((m) => m.text === "re: marker", 20_000);

    expect(repliesWith("re: ping")).toHaveLength(1);
    expect(harness.tg.callsTo("sendMessage").filter((c) => c.params.text === "re: ping")).toHaveLength(3);
    expect(llmAsked("ping")).toHaveLength(1);
    expect(harness.llm.requests.map(lastUserText)).toEqual(["ping", "marker"]);
  });

  it("starts with torn last lines in the session and the journal, keeps the valid entries and answers", async () => {
    const stamp = "2025-01-01T10:00:00.000000";
    await mkdir(join(harness.dir, "ws", "sessions"), { recursive: true });
    await writeFile(
      join(harness.dir, "ws", "sessions", "telegram_42.jsonl"),
      [
        JSON.stringify({
          _type: "metadata",
          key: "telegram:42",
          created_at: stamp,
          updated_at: stamp,
          metadata: {},
          last_consolidated: 0,
        }),
        JSON.stringify({ role: "user", content: "my name is Ada", timestamp: stamp }),
        JSON.stringify({ role: "assistant", content: "Nice to meet you, Ada.", timestamp: stamp }),
        '{"role":"user","content":"torn sess', // the process died in the middle of this append
      ].join("\n"),
    );
    await mkdir(join(harness.dir, "journal"), { recursive: true });
    await writeFile(
      join(harness.dir, "journal", "messages.jsonl"),
      [
        JSON.stringify({ t: "seen", key: "telegram:42:500" }),
        JSON.stringify({
          t: "out",
          id: "out-1",
          at: Date.now() - 1000,
          msg: { channel: "telegram", chatId: "42", content: "left over reply" },
        }),
        '{"t":"in","id":"in-9","at":1,"msg":{"channel":"telegr', // torn
      ].join("\n"),
    );
    harness.llm.setHandler(echo());
    const run = await startGateway();

    // The journal's valid entries were kept: the undelivered reply goes out, a seen message stays answered.
    await harness.tg.waitForSent((m) => m.text === "left over reply", 20_000);
    harness.tg.userMessage({ message_id: 500, text: "already answered before the crash" });
    harness.tg.userMessage({ text: "what is my name?" });
    await harness.tg.waitForSent((m) => m.text === "re: what is my name?", 20_000);
    expect(harness.llm.requests.map(lastUserText)).toEqual(["what is my name?"]);
    // The session's valid lines are the history the LLM saw; the torn one is not.
    const history = harness.llm.requests[0]!.body.messages.map((m) => m.content);
    expect(history).toEqual(expect.arrayContaining(["my name is Ada", "Nice to meet you, Ada."]));
    expect(JSON.stringify(history)).not.toContain("torn sess");

    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
    // The turn appended after the torn line is whole, and the journal was rewritten without it.
    expect(await sessionMessages("telegram:42")).toEqual([
      { role: "user", content: "my name is Ada" },
      { role: "assistant", content: "Nice to meet you, Ada." },
      { role: "user", content: "what is my name?" },
      { role: "assistant", content: "re: what is my name?" },
    ]);
    const journal = await readFile(join(harness.dir, "journal", "messages.jsonl"), "utf8");
    for (const line of journal.split("\n").filter(Boolean))
      expect(() => JSON.parse(line) as unknown).not.toThrow();
    expect(repliesWith("left over reply")).toHaveLength(1);
  });

  it("SIGTERM mid-turn: the reply is delivered to Telegram, then exit 0", async () => {
    harness.llm.setHandler(echo({ delayMs: 1500 }));
    const run = await startGateway();
    harness.tg.userMessage({ text: "slow one" });
    await waitFor(() => harness.llm.requests.length === 1, 20_000, "the LLM request");
    const signalledAt = Date.now();
    run.child.kill("SIGTERM");
    const code = await run.exited;
    const exitedAt = Date.now();

    expect(code).toBe(0);
    const reply = repliesWith("re: slow one");
    expect(reply).toHaveLength(1);
    expect(reply[0]!.at).toBeGreaterThanOrEqual(signalledAt);
    expect(reply[0]!.at).toBeLessThanOrEqual(exitedAt);
    expect(run.stderr).toContain('"msg":"stopped"');
    // Nothing is left for the next start: the journal holds no pending message or reply.
    const journal = await readFile(join(harness.dir, "journal", "messages.jsonl"), "utf8");
    const entries = journal
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { t: string; id?: string });
    const open = (start: string, ends: string[]) =>
      entries.filter((e) => e.t === start && !entries.some((d) => ends.includes(d.t) && d.id === e.id));
    expect(open("in", ["done"])).toEqual([]);
    expect(open("out", ["sent", "dropped"])).toEqual([]);
  });

  it("a bad config: exit 78, and stderr names the file and the key", async () => {
    await writeGatewayConfig(
      harness.dir,
      { llmBaseURL: harness.llm.baseURL, telegram: harness.tg },
      { gateway: { port: "eighty" } },
    );
    const result = await runCli(["gateway", "--config", harness.configPath], {
      cwd: harness.dir,
      env: { HOME: harness.dir },
      timeoutMs: CHILD_LIMIT_MS,
    });
    expect(result.code).toBe(78);
    expect(result.stderr).toContain(harness.configPath);
    expect(result.stderr).toMatch(/gateway\.port/);
    expect(harness.tg.calls).toEqual([]); // it stopped before touching any platform
  });
});
