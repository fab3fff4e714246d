/**
 * ask_human and approval prompts through a channel manager: buttons pressed on a channel (refused
 * for strangers and for people who are not approvers), and the terminal, where the answer is typed.
 */
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { Questions } from "../../src/approvals/questions.js";
import type { ApprovalPolicy } from "../../src/approvals/types.js";
import { createAskHumanTool } from "../../src/agent/tools/ask-human.js";
import type { InboundMessage, OutboundMessage } from "../../src/bus/types.js";
import { TerminalChannel } from "../../src/channels/terminal/adapter.js";
import { ChannelManager } from "../../src/channels/manager.js";
import type { Channel, ChoiceClick, InboundSink, SentMessage } from "../../src/channels/types.js";
import { toolCall } from "../fakes/openai-server.js";
import { startHarness, type Harness } from "../helpers/agent-harness.js";
import { waitFor } from "../helpers/wait.js";

/** A channel with buttons: questions get a ref, presses go to the sink as an adapter's would. */
class ButtonChannel implements Channel {
  readonly name = "test";
  readonly sent: OutboundMessage[] = [];
  private sink: InboundSink | undefined;
  start(sink: InboundSink): Promise<void> {
    this.sink = sink;
    return Promise.resolve();
  }
  stop(): Promise<void> {
    return Promise.resolve();
  }
  send(msg: OutboundMessage): Promise<SentMessage | void> {
    this.sent.push(msg);
    return Promise.resolve(msg.kind === "question" ? { ref: `ref-${this.sent.length}` } : undefined);
  }
  receive(msg: Partial<InboundMessage> & { content: string }): void {
    this.sink!.publishInbound({ channel: "test", senderId: "user-1", chatId: "c1", ...msg });
  }
  press(click: Omit<ChoiceClick, "channel" | "chatId">) {
    return this.sink!.choose!({ channel: "test", chatId: "c1", ...click });
  }
}

let h: Harness;
/** What the test started, cleaned up after it. */
let running: Harness | undefined;
let manager: ChannelManager | undefined;
afterEach(async () => {
  await manager?.stop(1000);
  manager = undefined;
  await running?.cleanup();
  running = undefined;
});

describe("ask_human tool", () => {
  it("no answer in time: the model is told; nobody to ask: told to assume", async () => {
    const published: OutboundMessage[] = [];
    const desk = (unattended: boolean) =>
      new Questions({
        publish: (m) => published.push(m),
        timeoutMs: 20,
        admins: () => [],
        allowFrom: () => [],
        unattended,
      });
    const ctx = {
      workspace: "/tmp",
      channel: "test",
      chatId: "c1",
      sessionKey: "test:c1",
      signal: new AbortController().signal,
      sender: { id: "user-1", aliases: [] },
      publish: () => undefined,
      turn: { sentToOriginChat: false },
    };
    const tool = createAskHumanTool(desk(false), "10 minutes");
    await expect(tool.execute({ question: "Which color?" }, ctx)).resolves.toBe(
      "No answer within 10 minutes.",
    );
    expect(published.map((m) => m.kind)).toEqual(["question", "edit"]);
    await expect(
      createAskHumanTool(desk(true), "10 minutes").execute({ question: "Which?" }, ctx),
    ).resolves.toMatch(/^Error: no one can answer questions in this chat/);
  });
});

describe("ask_human through a channel with buttons", { timeout: 60_000 }, () => {
  it("a stranger and a non-approver are refused, the asker's press answers, the prompt is edited by ref", async () => {
    h = running = await startHarness();
    const channel = new ButtonChannel();
    manager = new ChannelManager({
      bus: h.bus,
      sendProgress: false,
      sendToolHints: false,
      questions: h.questions,
    });
    manager.add(channel, { allowFrom: ["user-1", "user-2"] });
    await manager.start();
    h.fake!.enqueue(
      { toolCalls: [toolCall("ask_human", { question: "Which color?", options: ["Red", "Blue"] })] },
      { content: "Blue it is." },
    );
    channel.receive({ content: "paint it" });
    await waitFor(() => channel.sent.some((m) => m.kind === "question"), undefined, "the question");
    const questionId = channel.sent.find((m) => m.kind === "question")!.question!.id;

    expect(channel.press({ senderId: "stranger", questionId, choiceId: "o2" })).toEqual({
      accepted: false,
      notice: "You are not allowed to answer this.",
    });
    expect(channel.press({ senderId: "user-2", questionId, choiceId: "o2" })).toEqual({
      accepted: false,
      notice: "Only user-1 can answer this.",
    });
    expect(channel.press({ senderId: "user-1", questionId, choiceId: "o2" })).toEqual({
      accepted: true,
      notice: "Answered.",
    });
    await waitFor(() => channel.sent.some((m) => m.content === "Blue it is."), undefined, "the reply");
    expect(channel.sent.find((m) => m.kind === "edit")).toMatchObject({
      content: "❓ Which color?\n💬 user-1: Blue",
      edit: { questionId, ref: "ref-1" },
    });
    const results = h.fake!.requests[1]!.body.messages.filter((m) => m.role === "tool");
    expect(results.map((m) => m.content)).toEqual(["The user answered: Blue"]);
  });
});

/** Asks before every exec, allows the rest. */
const askForExec: ApprovalPolicy = {
  decide: ({ tool }) =>
    tool === "exec"
      ? { action: "ask", reason: "runs a shell command", layer: "builtin", always: { tool, program: "echo" } }
      : { action: "allow", reason: "harmless", layer: "mode" },
};

describe("questions in the terminal", { timeout: 60_000 }, () => {
  it("shows how to answer; the typed answer starts no turn, so leaving still works", async () => {
    h = running = await startHarness({
      config: { tools: { approval: { mode: "risky" }, exec: { sandbox: "off" } } },
      agent: { approvalPolicy: askForExec },
    });
    const input = new PassThrough();
    const output = new PassThrough();
    let printed = "";
    output.on("data", (d: Buffer) => (printed += d.toString()));
    let exited = false;
    const terminal = new TerminalChannel({
      chatId: "direct",
      input,
      output,
      color: false,
      onExit: () => (exited = true),
    });
    manager = new ChannelManager({
      bus: h.bus,
      sendProgress: false,
      sendToolHints: false,
      questions: h.questions,
    });
    manager.add(terminal, { allowFrom: ["*"] });
    await manager.start();
    h.fake!.enqueue(
      { toolCalls: [toolCall("ask_human", { question: "Which color?", options: ["Red", "Blue"] })] },
      { toolCalls: [toolCall("exec", { command: "echo painted" })] },
      { content: "Painted it blue." },
    );

    input.write("paint it\n");
    await waitFor(() => printed.includes("1) Red  2) Blue  (or type your answer)"), undefined, "the options");
    expect(printed).toContain("❓ Which color?");
    input.write("2\n");
    await waitFor(
      () => printed.includes("[y] Approve  [n] Deny  [a] Always allow this in this chat"),
      undefined,
      "the approval prompt",
    );
    expect(printed).toContain("💬 user: Blue");
    // /status while asked is answered at once; it is not an answer either.
    input.write("/status\n");
    await waitFor(
      () => printed.includes("Waiting for your answer: Run the shell command"),
      undefined,
      "/status",
    );
    input.write("y\n");
    await waitFor(() => printed.includes("Painted it blue."), undefined, "the reply");
    expect(printed).toContain("✅ Approved by user: Run the shell command: echo painted");
    const last = h.fake!.requests[2]!.body.messages.filter((m) => m.role === "tool");
    expect(String(last[0]!.content)).toBe("The user answered: Blue");
    expect(String(last[1]!.content)).toContain("painted");

    // Neither answer was counted as a line waiting for its turn: leaving does not wait.
    input.write("exit\n");
    await waitFor(() => exited, undefined, "leaving");
  });
});
