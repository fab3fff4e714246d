/**
 * Replay after a crash does not repeat side effects: the real `palaver
 * gateway` child process, the loopback fake Telegram and fake LLM, a SIGKILL
 * right after a `message` tool call, then a restart over the same state
 * folder. The replayed turn asks the LLM again, which calls the same tool with
 * the same arguments; the recorded result is reused instead of sending again.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FakeOpenAI, lastUserText, toolCall, type RecordedRequest } from "../fakes/openai-server.js";
import { FakeTelegram } from "../fakes/telegram-server.js";
import { startCli, type RunningCli } from "../helpers/cli.js";
import { writeGatewayConfig } from "../helpers/gateway-process.js";
import { waitFor } from "../helpers/wait.js";

/** Upper bound for one gateway child: a test that hangs is killed, never left behind. */
const CHILD_LIMIT_MS = 90_000;
const STARTUP_MS = 30_000;

let dir: string;
let llm: FakeOpenAI;
let tg: FakeTelegram;
let configPath: string;
const children: RunningCli[] = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-replay-"));
  llm = await FakeOpenAI.start();
  tg = await FakeTelegram.start();
  configPath = await writeGatewayConfig(dir, { llmBaseURL: llm.baseURL, telegram: tg });
});

afterEach(async () => {
  for (const run of children.splice(0)) {
    if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill("SIGKILL");
    await run.exited.catch(() => undefined);
  }
  await tg.close();
  await llm.close();
  await rm(dir, { recursive: true, force: true });
});

/** Starts `palaver gateway` and resolves once it long-polls Telegram (as in crash.test.ts). */
async function startGateway(): Promise<RunningCli> {
  const isLongPoll = (c: { params: Record<string, unknown> }) =>
    typeof c.params.timeout === "number" && c.params.timeout > 0;
  const pollsBefore = tg.callsTo("getUpdates").filter(isLongPoll).length;
  const run = startCli(["gateway", "--config", configPath], {
    cwd: dir,
    env: { HOME: dir },
    timeoutMs: CHILD_LIMIT_MS,
  });
  children.push(run);
  const died = run.exited.then((code) => {
    throw new Error(`the gateway exited (${code}) before it was ready:\n${run.stderr}`);
  });
  const polling = tg.waitFor(
    () => tg.callsTo("getUpdates").filter(isLongPoll).length > pollsBefore,
    STARTUP_MS,
    "the gateway's long poll",
  );
  died.catch(() => undefined);
  polling.catch(() => undefined);
  await Promise.race([polling, died]);
  return run;
}

const hasToolResult = (req: RecordedRequest) => req.body.messages.some((m) => m.role === "tool");
const toolResults = (req: RecordedRequest) =>
  req.body.messages.filter((m) => m.role === "tool").map((m) => m.content);
/** Whether the message journal has recorded the reply with this text as sent. */
async function outboxMarkedSent(text: string): Promise<boolean> {
  const journal = await readFile(join(dir, "journal", "messages.jsonl"), "utf8").catch(() => "");
  const entries = journal
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      try {
        return JSON.parse(line) as { t?: string; id?: string; msg?: { content?: string } };
      } catch {
        return {}; // a line being appended right now
      }
    });
  const out = entries.find((e) => e.t === "out" && e.msg?.content === text);
  return out !== undefined && entries.some((e) => e.t === "sent" && e.id === out.id);
}
const sentTexts = (text: string) => tg.sent.filter((m) => m.method === "sendMessage" && m.text === text);

describe("a turn replayed after SIGKILL", { timeout: 180_000 }, () => {
  it("does not send the message tool's message a second time", async () => {
    // The model answers "remind me" with a message tool call; once it has the tool's result it
    // ends the turn. In the first run that second request hangs: the process is killed there.
    let hangAfterTool = true;
    llm.setHandler((req) => {
      if (lastUserText(req) !== "remind me") return { content: `re: ${lastUserText(req)}` };
      if (!hasToolResult(req)) return { toolCalls: [toolCall("message", { content: "Tea at five." })] };
      return hangAfterTool ? { content: "all done", delayMs: 60_000 } : { content: "all done" };
    });
    const first = await startGateway();
    tg.userMessage({ text: "remind me" });
    await tg.waitForSent((m) => m.text === "Tea at five.", 20_000);
    // Killed before the outbox knows Telegram took it, the message journal would rightly send it
    // again (at least once): that window is not what this test is about, so it waits it out.
    await waitFor(() => outboxMarkedSent("Tea at five."), 20_000, "the outbox to record the send");
    await waitFor(
      () => llm.requests.filter(hasToolResult).length === 1,
      20_000,
      "the LLM asked after the tool",
    );
    first.child.kill("SIGKILL");
    await first.exited;

    hangAfterTool = false;
    await startGateway();
    // The replayed turn runs to its end: the LLM sees the tool's result a second time.
    await waitFor(() => llm.requests.filter(hasToolResult).length === 2, 30_000, "the replayed turn");
    // Same chat, handled in order: once this is answered, the replayed turn has ended.
    tg.userMessage({ text: "marker" });
    await tg.waitForSent((m) => m.text === "re: marker", 30_000);

    expect(sentTexts("Tea at five.")).toHaveLength(1);
    // The replay was told what the first run's call did, and, as then, the tool's message was the reply.
    const replayed = llm.requests.filter(hasToolResult)[1]!;
    expect(toolResults(replayed)).toEqual(["Message sent to telegram:42"]);
    expect(sentTexts("all done")).toHaveLength(0);
  });
});
