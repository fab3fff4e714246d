/**
 * Replay after a crash does not repeat side effects: the real `palaver
 * gateway` child process, the loopback fake Telegram and fake LLM, a SIGKILL
 * right after a `message` tool call, then a restart over the same state
 * folder. The replayed turn asks the LLM again, which calls the same tool with
 * the same arguments; the recorded result is reused instead of sending again.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { lastUserText, toolCall, type FakeOpenAI, type RecordedRequest } from "../fakes/openai-server.js";
import type { FakeTelegram } from "../fakes/telegram-server.js";
import { GatewayHarness } from "../helpers/gateway-process.js";
import { waitFor } from "../helpers/wait.js";

/** Temp folder, fakes, config and gateway children (killed after each test): see GatewayHarness. */
const harness = new GatewayHarness({ prefix: "palaver-replay-", childLimitMs: 90_000 });

let dir: string;
let llm: FakeOpenAI;
let tg: FakeTelegram;

beforeEach(async () => {
  await harness.start();
  ({ dir, llm, tg } = harness);
});

afterEach(() => harness.close());

const startGateway = () => harness.startGateway();

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
