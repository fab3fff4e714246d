/**
 * Approvals through the whole agent: the real openai SDK against FakeOpenAI, the loop, the runner's
 * gate and the question desk, answered by typed replies and button presses as channels deliver them.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { ApprovalPolicy } from "../../src/approvals/types.js";
import type { OutboundMessage } from "../../src/bus/types.js";
import { toolCall, type FakeMessage } from "../fakes/openai-server.js";
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
afterEach(async () => {
  await h.cleanup();
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
    h = await withApprovals();
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
    h = await withApprovals();
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
    h = await withApprovals();
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
    h = await withApprovals();
    h.fake!.enqueue({ toolCalls: [toolCall("exec", { command: "echo stopped" })] });
    h.send("c1", "clean the build");
    await question();
    const status = await h.ask("c1", "/status");
    expect(status.content).toContain('Waiting for your answer: exec {"command":"echo stopped"}');
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
    h = await startHarness({
      config: { tools: { approval: { mode: "off" }, exec: { sandbox: "off" } } },
      agent: { approvalPolicy: askForExec },
    });
    h.fake!.enqueue({ toolCalls: [toolCall("exec", { command: "echo free" })] }, { content: "Ran it." });
    expect((await h.ask("c1", "go")).content).toBe("Ran it.");
    expect(toolResults(1)[0]).toContain("free");
    expect(kind("question")).toEqual([]);
  });

  it("background work with nobody to ask (no sender, no admins): denied at once", async () => {
    h = await withApprovals();
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
    h = await startHarness();
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
