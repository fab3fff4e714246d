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
import { lastUserText, type FakeOpenAI, type FakeReply } from "../fakes/openai-server.js";
import type { FakeTelegram } from "../fakes/telegram-server.js";
import { runCli, type RunningCli } from "../helpers/cli.js";
import { GatewayHarness, writeGatewayConfig } from "../helpers/gateway-process.js";
import { waitFor } from "../helpers/wait.js";

/** Temp folder, fakes, config and gateway children (killed after each test): see GatewayHarness. */
const harness = new GatewayHarness({ prefix: "palaver-crash-" });
const CHILD_LIMIT_MS = harness.childLimitMs;

let dir: string;
let llm: FakeOpenAI;
let tg: FakeTelegram;
let configPath: string;

beforeEach(async () => {
  await harness.start();
  ({ dir, llm, tg, configPath } = harness);
});

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

const repliesWith = (text: string) => tg.sent.filter((m) => m.method === "sendMessage" && m.text === text);
const llmAsked = (text: string) => llm.requests.filter((r) => lastUserText(r) === text);

/** The session's messages as the store reads them (torn lines skipped). */
async function sessionMessages(key: string): Promise<{ role: string; content: unknown }[]> {
  const session = await new SessionStore(join(dir, "ws", "sessions")).get(key);
  return session.messages.map((m) => ({ role: m.role, content: m.content }));
}

describe("palaver gateway survives being killed", { timeout: 120_000 }, () => {
  it("SIGKILL mid-turn, then a restart: the message is answered exactly once, its redelivery ignored", async () => {
    llm.setHandler(echo({ delayMs: 60_000 }));
    const first = await startGateway();
    tg.userMessage({ text: "hello" });
    // Telegram never hears that the update was handled: the offset does not move, so it redelivers.
    tg.hangGetUpdates = true;
    await waitFor(() => llm.requests.length === 1, 20_000, "the LLM request");
    await kill(first);
    expect(tg.sent).toEqual([]);
    expect(tg.pendingUpdates).toBe(1);

    tg.hangGetUpdates = false;
    tg.releaseHung();
    llm.setHandler(echo());
    await startGateway();
    await tg.waitForSent((m) => m.text === "re: hello", 20_000);
    await tg.waitFor(() => tg.pendingUpdates === 0, 20_000, "the redelivered update to be confirmed");
    // Same chat, handled in order: once this is answered, the redelivery has been dealt with.
    tg.userMessage({ text: "marker" });
    await tg.waitForSent((m) => m.text === "re: marker", 20_000);

    expect(repliesWith("re: hello")).toHaveLength(1);
    expect(llmAsked("hello")).toHaveLength(2); // the one cut off and the one answered
    expect(llmAsked("marker")).toHaveLength(1);
    // The cut-off turn left nothing in the session: the message is in it once.
    const messages = await sessionMessages("telegram:42");
    expect(messages.filter((m) => m.content === "hello")).toHaveLength(1);
  });

  it("SIGKILL while Telegram refuses sendMessage, then a restart: delivered once, LLM not asked again", async () => {
    llm.setHandler(echo());
    // Two refusals: the first attempt and grammy's retry after 3 s; the process dies after the second.
    tg.failNext("sendMessage", { code: 502, description: "Bad Gateway" }, 2);
    const first = await startGateway();
    tg.userMessage({ text: "ping" });
    await tg.waitFor(() => tg.callsTo("sendMessage").length === 2, 15_000, "two refused sends");
    await kill(first);
    expect(tg.sent).toEqual([]);
    expect(llm.requests).toHaveLength(1);

    await startGateway(); // Telegram is healthy again: nothing more is scripted
    await tg.waitForSent((m) => m.text === "re: ping", 20_000);
    tg.userMessage({ text: "marker" });
    await tg.waitForSent((m) => m.text === "re: marker", 20_000);

    expect(repliesWith("re: ping")).toHaveLength(1);
    expect(tg.callsTo("sendMessage").filter((c) => c.params.text === "re: ping")).toHaveLength(3);
    expect(llmAsked("ping")).toHaveLength(1);
    expect(llm.requests.map(lastUserText)).toEqual(["ping", "marker"]);
  });

  it("starts with torn last lines in the session and the journal, keeps the valid entries and answers", async () => {
    const stamp = "2025-01-01T10:00:00.000000";
    await mkdir(join(dir, "ws", "sessions"), { recursive: true });
    await writeFile(
      join(dir, "ws", "sessions", "telegram_42.jsonl"),
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
    await mkdir(join(dir, "journal"), { recursive: true });
    await writeFile(
      join(dir, "journal", "messages.jsonl"),
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
    llm.setHandler(echo());
    const run = await startGateway();

    // The journal's valid entries were kept: the undelivered reply goes out, a seen message stays answered.
    await tg.waitForSent((m) => m.text === "left over reply", 20_000);
    tg.userMessage({ message_id: 500, text: "already answered before the crash" });
    tg.userMessage({ text: "what is my name?" });
    await tg.waitForSent((m) => m.text === "re: what is my name?", 20_000);
    expect(llm.requests.map(lastUserText)).toEqual(["what is my name?"]);
    // The session's valid lines are the history the LLM saw; the torn one is not.
    const history = llm.requests[0]!.body.messages.map((m) => m.content);
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
    const journal = await readFile(join(dir, "journal", "messages.jsonl"), "utf8");
    for (const line of journal.split("\n").filter(Boolean))
      expect(() => JSON.parse(line) as unknown).not.toThrow();
    expect(repliesWith("left over reply")).toHaveLength(1);
  });

  it("SIGTERM mid-turn: the reply is delivered to Telegram, then exit 0", async () => {
    llm.setHandler(echo({ delayMs: 1500 }));
    const run = await startGateway();
    tg.userMessage({ text: "slow one" });
    await waitFor(() => llm.requests.length === 1, 20_000, "the LLM request");
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
    const journal = await readFile(join(dir, "journal", "messages.jsonl"), "utf8");
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
    await writeGatewayConfig(dir, { llmBaseURL: llm.baseURL, telegram: tg }, { gateway: { port: "eighty" } });
    const result = await runCli(["gateway", "--config", configPath], {
      cwd: dir,
      env: { HOME: dir },
      timeoutMs: CHILD_LIMIT_MS,
    });
    expect(result.code).toBe(78);
    expect(result.stderr).toContain(configPath);
    expect(result.stderr).toMatch(/gateway\.port/);
    expect(tg.calls).toEqual([]); // it stopped before touching any platform
  });
});
