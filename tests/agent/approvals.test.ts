/**
 * Approvals through the whole agent: the real openai SDK against FakeOpenAI, the loop, the runner's
 * gate and the question desk, answered by typed replies and button presses as channels deliver them.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { runTurn, type ApproveCall } from "../../src/agent/runner.js";
import type { CallKey, RecalledCall, TurnCallRecord } from "../../src/agent/tool-replay.js";
import { createDefaultTools } from "../../src/agent/tools/index.js";
import { ConfigSchema } from "../../src/config/schema.js";
import type { ApprovalPolicy } from "../../src/approvals/types.js";
import type { OutboundMessage } from "../../src/bus/types.js";
import {
  FakeOpenAI,
  lastUserText,
  toolCall,
  type FakeMessage,
  type RecordedRequest,
} from "../fakes/openai-server.js";
import { fakeProvider } from "../helpers/fake-provider.js";
import { startHarness, type Harness } from "../helpers/agent-harness.js";
import { waitFor } from "../helpers/wait.js";

/** Asks before every exec, allows the rest. */
const askForExec: ApprovalPolicy = {
  decide: ({ tool }) =>
    tool === "exec"
      ? { action: "ask", reason: "runs a shell command", layer: "builtin", always: { tool, program: "echo" } }
      : { action: "allow", reason: "harmless", layer: "mode" },
};

let h: Harness;
/** The harness to clean up after a test (the replay tests start none). */
let running: Harness | undefined;
afterEach(async () => {
  await running?.cleanup();
  running = undefined;
});

function withApprovals(): Promise<Harness> {
  return startHarness({
    config: { tools: { approval: { mode: "risky" }, exec: { sandbox: "off" } } },
    agent: { approvalPolicy: askForExec },
  });
}

const kind = (k: OutboundMessage["kind"]) => h.outbound.filter((m) => m.kind === k);

/** The nth question published, once it is. */
async function question(n = 0): Promise<OutboundMessage> {
  await waitFor(() => kind("question").length > n, undefined, `question ${n + 1}`);
  return kind("question")[n]!;
}

function press(q: OutboundMessage, choiceId: string) {
  return h.questions.choose({
    channel: q.channel,
    chatId: q.chatId,
    senderId: "user-1",
    questionId: q.question!.id,
    choiceId,
  });
}

/** The tool results the model was given in its nth request. */
function toolResults(request: number): string[] {
  const messages: FakeMessage[] = h.fake!.requests[request]!.body.messages;
  return messages.filter((m) => m.role === "tool").map((m) => String(m.content));
}

describe("approvals in the agent loop", { timeout: 60_000 }, () => {
  it("asks before exec; a typed yes runs it and the model sees the output; the yes starts no turn", async () => {
    h = running = await withApprovals();
    h.fake!.enqueue(
      { toolCalls: [toolCall("exec", { command: "echo approved-output" })] },
      { content: "Done." },
    );
    const reply = h.ask("c1", "clean the build");
    const q = await question();
    expect(q).toMatchObject({ channel: "test", chatId: "c1" });
    expect(q.content).toContain("echo approved-output");
    h.send("c1", "y");
    expect((await reply).content).toBe("Done.");
    expect(toolResults(1)[0]).toContain("approved-output");
    expect(kind("edit")[0]!.content).toMatch(/^✅ Approved by user-1: /);
    expect(h.fake!.requests).toHaveLength(2);
    await h.loop.idle();
    expect(kind("final")).toHaveLength(1);
  });

  it("a Deny press: the command does not run and the model is told", async () => {
    h = running = await withApprovals();
    h.fake!.enqueue(
      { toolCalls: [toolCall("exec", { command: "echo never-run" })] },
      { content: "OK, I won't." },
    );
    const reply = h.ask("c1", "clean the build");
    expect(press(await question(), "deny")).toEqual({ accepted: true, notice: "Denied." });
    expect((await reply).content).toBe("OK, I won't.");
    expect(toolResults(1)).toEqual([
      "Error: denied by the user (user-1). Do not retry it; ask the user what to do instead.",
    ]);
  });

  it("two calls in one reply, one approved and one denied: both get a result, in order", async () => {
    h = running = await withApprovals();
    h.fake!.enqueue(
      {
        toolCalls: [
          toolCall("exec", { command: "echo first-ran" }, "call_a"),
          toolCall("exec", { command: "echo second-ran" }, "call_b"),
        ],
      },
      { content: "Half done." },
    );
    const reply = h.ask("c1", "do both");
    press(await question(0), "approve");
    press(await question(1), "deny");
    expect((await reply).content).toBe("Half done.");
    const messages = h.fake!.requests[1]!.body.messages.filter((m) => m.role === "tool");
    expect(messages.map((m) => m.tool_call_id)).toEqual(["call_a", "call_b"]);
    expect(String(messages[0]!.content)).toContain("first-ran");
    expect(String(messages[1]!.content)).toMatch(/^Error: denied by the user/);
  });

  it("/status lists the waiting question; /stop closes it, stops the turn and says so", async () => {
    h = running = await withApprovals();
    h.fake!.enqueue({ toolCalls: [toolCall("exec", { command: "echo stopped" })] });
    h.send("c1", "clean the build");
    await question();
    const status = await h.ask("c1", "/status");
    expect(status.content).toContain("Waiting for your answer: Run the shell command: `echo stopped`");
    const stopped = await h.ask("c1", "/stop");
    expect(stopped.content).toBe(
      "Stopped the running reply. The question waiting for an answer is closed; nothing it asked about ran.",
    );
    await h.loop.idle();
    expect(kind("edit")[0]!.content).toMatch(/^⏹ Stopped: .* was not run\.$/);
    expect(h.fake!.requests).toHaveLength(1);
    expect(h.questions.openIn("test", "c1")).toEqual([]);
  });

  it("mode off: never asks", async () => {
    h = running = await startHarness({
      config: { tools: { approval: { mode: "off" }, exec: { sandbox: "off" } } },
      agent: { approvalPolicy: askForExec },
    });
    h.fake!.enqueue({ toolCalls: [toolCall("exec", { command: "echo free" })] }, { content: "Ran it." });
    expect((await h.ask("c1", "go")).content).toBe("Ran it.");
    expect(toolResults(1)[0]).toContain("free");
    expect(kind("question")).toEqual([]);
  });

  it("mode off with rules: the gate still runs, since the config's rules apply in every mode", async () => {
    h = running = await startHarness({
      config: {
        tools: {
          approval: { mode: "off", rules: [{ tool: "exec", action: "ask" }] },
          exec: { sandbox: "off" },
        },
      },
      agent: { approvalPolicy: askForExec },
    });
    h.fake!.enqueue({ toolCalls: [toolCall("exec", { command: "echo ruled" })] }, { content: "Ran it." });
    const reply = h.ask("c1", "go");
    press(await question(), "approve");
    expect((await reply).content).toBe("Ran it.");
  });

  it("a subagent asks in the chat that spawned it, answered by an admin (it has no sender)", async () => {
    h = running = await startHarness({
      config: { tools: { approval: { mode: "risky" }, exec: { sandbox: "off" } } },
      agent: { approvalPolicy: askForExec, adminsOf: () => ["boss"] },
    });
    const system = (req: RecordedRequest) => {
      const content = req.body.messages[0]?.content;
      return typeof content === "string" ? content : "";
    };
    const hasTool = (req: RecordedRequest) => req.body.messages.some((m) => m.role === "tool");
    h.fake!.setHandler((req) => {
      if (system(req).startsWith("# Subagent"))
        return hasTool(req)
          ? { content: "sub done" }
          : { toolCalls: [toolCall("exec", { command: "echo sub-ran" })] };
      if (lastUserText(req).includes("[Subagent")) return { content: "The task is done." };
      return hasTool(req)
        ? { content: "Started." }
        : { toolCalls: [toolCall("spawn", { task: "run echo" })] };
    });
    expect((await h.ask("c1", "do it in the background")).content).toBe("Started.");
    const q = await question();
    expect(q).toMatchObject({ channel: "test", chatId: "c1" });
    // The person who spawned it is not its sender: only the admin may answer.
    expect(press(q, "approve")).toEqual({ accepted: false, notice: "Only boss can answer this." });
    const done = new Promise<OutboundMessage>((resolve) =>
      h.bus.onOutbound((m) => m.content === "The task is done." && resolve(m)),
    );
    expect(
      h.questions.choose({
        channel: "test",
        chatId: "c1",
        senderId: "boss",
        questionId: q.question!.id,
        choiceId: "approve",
      }),
    ).toEqual({ accepted: true, notice: "Approved." });
    await done;
    const sub = h.fake!.requests.find((r) => system(r).startsWith("# Subagent") && hasTool(r))!;
    expect(String(sub.body.messages.find((m) => m.role === "tool")!.content)).toContain("sub-ran");
  });

  it("background work with nobody to ask (no sender, no admins): denied at once", async () => {
    h = running = await withApprovals();
    h.fake!.enqueue({ toolCalls: [toolCall("exec", { command: "echo cron" })] }, { content: "Could not." });
    const reply = new Promise<OutboundMessage>((resolve) =>
      h.bus.onOutbound((m) => (m.kind ?? "final") === "final" && resolve(m)),
    );
    h.bus.publishInbound({
      channel: "system",
      senderId: "cron",
      chatId: "test:c1",
      content: "[cron] clean up",
      metadata: { origin: { channel: "test", chatId: "c1" } },
    });
    expect((await reply).content).toBe("Could not.");
    expect(toolResults(1)[0]).toMatch(
      /^Error: not approved: runs a shell command, and no one can approve it/,
    );
    expect(kind("question")).toEqual([]);
  });
});

describe("ask_human in the agent loop", { timeout: 60_000 }, () => {
  it("the question goes to the chat; the next message is the answer, not a new turn", async () => {
    h = running = await startHarness();
    h.fake!.enqueue(
      { toolCalls: [toolCall("ask_human", { question: "Which color?", options: ["Red", "Blue"] })] },
      { content: "Blue it is." },
    );
    const reply = h.ask("c1", "paint it");
    const q = await question();
    expect(q.content).toBe("❓ Which color?");
    expect(q.question!.choices).toEqual([
      { id: "o1", label: "Red" },
      { id: "o2", label: "Blue" },
    ]);
    h.send("c1", "blue, the dark one");
    expect((await reply).content).toBe("Blue it is.");
    expect(toolResults(1)).toEqual(["The user answered: blue, the dark one"]);
    expect(kind("edit")[0]!.content).toBe("❓ Which color?\n💬 user-1: blue, the dark one");
    await h.loop.idle();
    expect(h.fake!.requests).toHaveLength(2);
  });
});

describe("approvals and the replay of a turn", { timeout: 60_000 }, () => {
  /** An in-memory record of a turn's calls, as the tool journal keeps them. */
  function memoryRecord() {
    const calls = new Map<string, RecalledCall>();
    const id = (key: CallKey) => `${key.name}|${key.args}|${key.n}`;
    const record: TurnCallRecord = {
      recall: (key) => calls.get(id(key)),
      started: (key) => void calls.set(id(key), { state: "started" }),
      done: (key, result, turn) => void calls.set(id(key), { state: "done", result, turn }),
    };
    return { record, calls };
  }

  async function runOnce(opts: { record: TurnCallRecord; approve: ApproveCall; signal?: AbortSignal }) {
    const fake = await FakeOpenAI.start();
    const workspace = await mkdtemp(join(tmpdir(), "palaver-approvals-replay-"));
    try {
      fake.enqueue({ toolCalls: [toolCall("exec", { command: "echo replayed" })] }, { content: "end" });
      const tools = createDefaultTools(
        ConfigSchema.parse({ tools: { exec: { sandbox: "off" } } }),
        workspace,
      );
      return await runTurn({
        provider: fakeProvider(fake),
        tools,
        messages: [{ role: "user", content: "go" }],
        maxIterations: 5,
        toolResultMaxChars: 10_000,
        replay: opts.record,
        approve: opts.approve,
        ctx: {
          workspace,
          channel: "test",
          chatId: "c1",
          sessionKey: "test:c1",
          signal: opts.signal ?? new AbortController().signal,
          publish: () => undefined,
          turn: { sentToOriginChat: false },
        },
      });
    } finally {
      await fake.close();
      await rm(workspace, { recursive: true, force: true });
    }
  }

  it("a denial is recorded: the replayed turn gets it again and nobody is asked twice", async () => {
    const { record } = memoryRecord();
    const denial = "Error: denied by the user (user-1). Do not retry it; ask the user what to do instead.";
    let asked = 0;
    const approve: ApproveCall = () => {
      asked++;
      return Promise.resolve(denial);
    };
    const first = await runOnce({ record, approve });
    const second = await runOnce({ record, approve });
    expect(asked).toBe(1);
    for (const result of [first, second])
      expect(result.messages.find((m) => m.role === "tool")!.content).toBe(denial);
  });

  it("stopped while waiting for the answer: the call is not recorded as started, so a replay asks again", async () => {
    const { record, calls } = memoryRecord();
    const stop = new AbortController();
    const approve: ApproveCall = (_call, ctx) =>
      new Promise((_resolve, reject) => {
        ctx.signal.addEventListener("abort", () => reject(new Error("shutdown")), { once: true });
        stop.abort(new Error("shutdown"));
      });
    await expect(runOnce({ record, approve, signal: stop.signal })).rejects.toThrow();
    expect([...calls.values()]).toEqual([]);
  });
});
