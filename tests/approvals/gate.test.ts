import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { OutboundMessage } from "../../src/bus/types.js";
import { FileChatRules } from "../../src/approvals/chat-rules.js";
import { createApprovalGate, type ApprovalOutcome } from "../../src/approvals/gate.js";
import { createApprovalPolicy } from "../../src/approvals/policy.js";
import { Questions } from "../../src/approvals/questions.js";
import { ApprovalSchema } from "../../src/config/schema.js";
import type { ApprovalPolicy } from "../../src/approvals/types.js";
import type { ToolContext } from "../../src/agent/tools/types.js";
import type { ToolCall } from "../../src/llm/types.js";
import { captureLog } from "../helpers/log.js";
import { waitFor } from "../helpers/wait.js";

/** Asks for exec (offering "always" for its program), denies `danger`, allows the rest. */
const policy: ApprovalPolicy = {
  decide: ({ tool, args }) => {
    if (tool === "danger") return { action: "deny", reason: "it is dangerous", layer: "rule" };
    if (tool !== "exec") return { action: "allow", reason: "harmless", layer: "mode" };
    const program = String(args.command).split(" ")[0]!;
    return { action: "ask", reason: "runs a shell command", layer: "builtin", always: { tool, program } };
  },
};

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function setup(
  timeoutMs = 600_000,
  withSender = true,
  use: (rules: FileChatRules) => ApprovalPolicy = () => policy,
) {
  const published: OutboundMessage[] = [];
  const counted: { outcome: ApprovalOutcome; waitedMs?: number }[] = [];
  const { log, lines } = captureLog();
  const questions = new Questions({
    publish: (msg) => published.push(msg),
    timeoutMs,
    admins: () => [],
    allowFrom: () => ["*"],
  });
  const dir = mkdtempSync(join(tmpdir(), "palaver-gate-"));
  dirs.push(dir);
  const chatRules = new FileChatRules(join(dir, "approvals", "rules.json"));
  const gate = createApprovalGate({
    policy: use(chatRules),
    desk: questions,
    chatRules,
    timeoutMs,
    log,
    meter: { approval: (outcome, waitedMs) => counted.push({ outcome, waitedMs }) },
  });
  const stop = new AbortController();
  const ctx: ToolContext = {
    workspace: "/tmp/ws",
    channel: "tg",
    chatId: "c1",
    sessionKey: "tg:c1",
    signal: stop.signal,
    ...(withSender ? { sender: { id: "42", aliases: [] } } : {}),
    publish: () => undefined,
    turn: { sentToOriginChat: false },
  };
  const call = (name: string, args: Record<string, unknown> = {}): ToolCall => ({
    id: "call_1",
    name,
    arguments: args,
    rawArguments: JSON.stringify(args),
  });
  const asked = async () => {
    await waitFor(() => published.some((m) => m.kind === "question"), undefined, "a question");
    return published.find((m) => m.kind === "question")!;
  };
  const press = async (choiceId: string, nth = 0) => {
    await waitFor(() => published.filter((m) => m.kind === "question").length > nth, undefined, "a question");
    const q = published.filter((m) => m.kind === "question")[nth]!;
    return questions.choose({
      channel: "tg",
      chatId: "c1",
      senderId: "42",
      questionId: q.question!.id,
      choiceId,
    });
  };
  return { gate, ctx, call, stop, published, counted, lines, chatRules, asked, press };
}

const readOnly = { readOnly: false };

describe("approval gate", () => {
  it("lets an allowed call run and refuses a denied one without asking", async () => {
    const { gate, ctx, call, published, counted } = setup();
    await expect(gate(call("read_file", { path: "a" }), ctx, readOnly)).resolves.toBeNull();
    await expect(gate(call("danger"), ctx, readOnly)).resolves.toBe(
      "Error: denied by policy: it is dangerous. Do not retry this call.",
    );
    expect(published).toEqual([]);
    expect(counted.map((c) => c.outcome)).toEqual(["allowed", "denied"]);
  });

  it("asks with Approve, Deny and Always; an approval lets the call run, logged with who and how long", async () => {
    const { gate, ctx, call, counted, lines, asked, press } = setup();
    const result = gate(call("exec", { command: "rm -rf build" }), ctx, readOnly);
    const q = await asked();
    expect(q.content).toContain("Run the shell command: `rm -rf build`");
    expect(q.content).toContain("runs a shell command");
    expect(q.question!.choices.map((c) => c.id)).toEqual(["approve", "deny", "always"]);
    expect(await press("approve")).toEqual({ accepted: true, notice: "Approved." });
    await expect(result).resolves.toBeNull();
    expect(counted).toEqual([{ outcome: "approved", waitedMs: expect.any(Number) as unknown }]);
    expect(lines.find((l) => l.decision === "approved")).toMatchObject({
      tool: "exec",
      args: '{"command":"rm -rf build"}',
      by: "42",
      waitedMs: expect.any(Number) as unknown,
    });
  });

  it("always: adds a rule for this chat and program, then runs", async () => {
    const { gate, ctx, call, chatRules, press } = setup();
    const result = gate(call("exec", { command: "make clean" }), ctx, readOnly);
    await press("always");
    await expect(result).resolves.toBeNull();
    expect(chatRules.forChat("tg", "c1")).toMatchObject([{ tool: "exec", program: "make", addedBy: "42" }]);
  });

  it("a denial, a timeout and nobody to ask each give the model a result it can act on", async () => {
    const denied = setup();
    const result = denied.gate(denied.call("exec", { command: "rm x" }), denied.ctx, readOnly);
    await denied.press("deny");
    await expect(result).resolves.toBe(
      "Error: denied by the user (42). Do not retry it; ask the user what to do instead.",
    );
    expect(denied.counted.map((c) => c.outcome)).toEqual(["rejected"]);

    const late = setup(20);
    await expect(late.gate(late.call("exec", { command: "rm x" }), late.ctx, readOnly)).resolves.toBe(
      "Error: not approved: no answer within 1 second. The call was not run.",
    );
    expect(late.counted.map((c) => c.outcome)).toEqual(["timeout"]);

    const alone = setup(600_000, false);
    const text = await alone.gate(alone.call("exec", { command: "rm x" }), alone.ctx, readOnly);
    expect(text).toMatch(
      /^Error: not approved: runs a shell command, and no one can approve it in this chat/,
    );
    expect(alone.published).toEqual([]);
  });

  it("/stop while asking: the call rejects with the turn's reason, counted as stopped", async () => {
    const { gate, ctx, call, stop, counted, asked, published } = setup();
    const result = gate(call("exec", { command: "rm x" }), ctx, readOnly);
    await asked();
    stop.abort(new Error("stopped by user"));
    await expect(result).rejects.toThrow("stopped by user");
    expect(counted.map((c) => c.outcome)).toEqual(["stopped"]);
    expect(published.find((m) => m.kind === "edit")!.content).toMatch(/^⏹ Stopped: /);
  });

  describe("with the real policy: Always covers the approved shape, and the prompt says which", () => {
    const real = (chatRules: FileChatRules) =>
      createApprovalPolicy(ApprovalSchema.parse({}), {
        chatRules,
        restrictToWorkspace: true,
        denyPatterns: [],
        stateDir: "/tmp/palaver-gate-state",
        home: "/tmp/palaver-gate-home",
      });

    it("after Always on `sed -n 1p`, a sed that runs a command asks again, with no Always", async () => {
      const { gate, ctx, call, published, press } = setup(600_000, true, real);
      const first = gate(call("exec", { command: "sed -n 1p notes.md" }), ctx, readOnly);
      expect(await press("always")).toEqual({
        accepted: true,
        notice: "Allowed, and from now on in this chat: `sed` without -i, w/W, e.",
      });
      await expect(first).resolves.toBeNull();
      const prompt = published.find((m) => m.kind === "question")!;
      expect(prompt.content).toContain('"Always" allows from now on in this chat: `sed` without -i, w/W, e.');
      // Covered: runs without a question.
      await expect(gate(call("exec", { command: "sed -n 2p notes.md" }), ctx, readOnly)).resolves.toBeNull();
      const widened = gate(call("exec", { command: "sed -n '1e touch X' notes.md" }), ctx, readOnly);
      await press("deny", 1);
      await expect(widened).resolves.toMatch(/^Error: denied by the user/);
      const second = published.filter((m) => m.kind === "question")[1]!;
      expect(second.question!.choices.map((c) => c.id)).toEqual(["approve", "deny"]);
      expect(second.content).toContain('"Always" is not offered: the sed script runs shell commands (e).');
    });

    it("find with -exec offers no Always; after Always on a plain find, -exec still asks", async () => {
      const { gate, ctx, call, published, press } = setup(600_000, true, real);
      const exec = gate(call("exec", { command: "find . -name AGENTS.md -exec cat {} +" }), ctx, readOnly);
      await press("approve");
      await expect(exec).resolves.toBeNull();
      const q = published.find((m) => m.kind === "question")!;
      expect(q.question!.choices.map((c) => c.id)).toEqual(["approve", "deny"]);
      expect(q.content).toContain('"Always" is not offered: find -exec runs other programs.');

      const plain = gate(call("exec", { command: "find . -name AGENTS.md -fls out" }), ctx, readOnly);
      await press("always", 1);
      await expect(plain).resolves.toBeNull();
      const widened = gate(call("exec", { command: "find . -maxdepth 0 -exec touch X {} +" }), ctx, readOnly);
      await press("deny", 2);
      await expect(widened).resolves.toMatch(/^Error: denied by the user/);
    });
  });
});
