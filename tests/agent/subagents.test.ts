import { mkdtemp, readFile, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  SubagentManager,
  announcement,
  defaultLabel,
  type SubagentManagerOptions,
} from "../../src/agent/subagents.js";
import { createWorkerTools } from "../../src/agent/tools/index.js";
import { MessageBus } from "../../src/bus/bus.js";
import type { InboundMessage, Origin } from "../../src/bus/types.js";
import { ConfigSchema } from "../../src/config/schema.js";
import type { OpenAIProvider } from "../../src/llm/openai-provider.js";
import { FakeOpenAI, lastUserText, toolCall } from "../fakes/openai-server.js";
import { startHarness } from "../helpers/agent-harness.js";
import { waitFor } from "../helpers/wait.js";
import { fakeProvider } from "../helpers/fake-provider.js";
import { captureLog } from "../helpers/log.js";

let fake: FakeOpenAI;
let workspace: string;
let bus: MessageBus;
let inbound: InboundMessage[];
let managers: SubagentManager[];

/** Makes a result long enough (200+ characters) that it is announced without a follow-up. */
const detailed = (text: string) => `${text} ${"With the details the user needs. ".repeat(7)}`.trimEnd();

const origin: Origin = {
  channel: "telegram",
  chatId: "42",
  sessionKey: "telegram:42:thread-7",
  threadId: "7",
  metadata: { chatType: "supergroup" },
};

beforeEach(async () => {
  fake = await FakeOpenAI.start();
  workspace = await realpath(await mkdtemp(join(tmpdir(), "palaver-subagents-")));
  bus = new MessageBus();
  inbound = [];
  bus.onInbound((msg) => inbound.push(msg));
  managers = [];
});

afterEach(async () => {
  await Promise.all(managers.map((m) => m.shutdown(2000)));
  await fake.close();
  await rm(workspace, { recursive: true, force: true });
});

function provider(): OpenAIProvider {
  return fakeProvider(fake, { maxRetries: 1, name: "custom" });
}

function manager(overrides: Partial<SubagentManagerOptions> = {}): SubagentManager {
  const m = new SubagentManager({
    provider: provider(),
    tools: createWorkerTools(ConfigSchema.parse({}), workspace),
    bus,
    workspace,
    maxConcurrent: 3,
    maxIterations: 5,
    toolResultMaxChars: 4000,
    log: pino({ level: "silent" }),
    ...overrides,
  });
  managers.push(m);
  return m;
}

describe("SubagentManager", () => {
  it("runs the task with a fresh context and reports the result as a system message for the origin chat", async () => {
    const answer = detailed("The answer is 4.");
    fake.enqueue({ content: answer });
    const m = manager();
    const { id, label, queued } = m.spawn({ task: "Work out 2 + 2", label: "sum", origin });
    expect(queued).toBe(false);
    expect(label).toBe("sum");

    await waitFor(() => inbound.length === 1);
    const msg = inbound[0]!;
    expect(msg.channel).toBe("system");
    expect(msg.senderId).toBe("subagent");
    expect(msg.chatId).toBe("telegram:42");
    expect(msg.sessionKey).toBe("telegram:42:thread-7");
    expect(msg.metadata?.origin).toEqual(origin);
    expect(msg.metadata?.subagentId).toBe(id);
    expect(msg.content).toBe(
      announcement({ label: "sum", task: "Work out 2 + 2", ok: true, result: answer }),
    );
    expect(msg.content).toContain('[Subagent "sum" completed successfully]');
    expect(msg.content).toContain("Result:\nThe answer is 4.");
    expect(fake.requests).toHaveLength(1);
    expect(m.listForSession(origin.sessionKey!)).toEqual([]);

    // A fresh context: system prompt about the task, the task as the only user message, worker tools only.
    const body = fake.requests[0]!.body;
    expect(body.messages.map((x) => x.role)).toEqual(["system", "user"]);
    const system = body.messages[0]!.content as string;
    expect(system).toContain("subagent");
    expect(system).toContain("Work out 2 + 2");
    expect(system).toContain(workspace);
    expect(system).toMatch(/cannot message the user/);
    expect(lastUserText(fake.requests[0]!)).toBe("Work out 2 + 2");
    const toolNames = body.tools!.map((t) => t.function.name);
    expect(toolNames).toContain("write_file");
    expect(toolNames).toContain("exec");
    expect(toolNames).not.toContain("message");
    expect(toolNames).not.toContain("spawn");
    expect(toolNames).not.toContain("cron");
  });

  it("returns from spawn at once while the LLM is still working", async () => {
    fake.enqueue({ content: detailed("slow result"), delayMs: 300 });
    const m = manager();
    // spawn is synchronous: it returns before the LLM is even asked.
    const { id } = m.spawn({ task: "something slow", origin });
    expect(m.listForSession(origin.sessionKey!)).toEqual([{ id, label: "something slow" }]);

    await waitFor(() => fake.requests.length === 1);
    expect(inbound).toEqual([]);
    expect(m.listForSession(origin.sessionKey!)).toHaveLength(1);

    await waitFor(() => inbound.length === 1);
    expect(inbound[0]!.content).toContain("slow result");
    expect(m.listForSession(origin.sessionKey!)).toEqual([]);
  });

  it("uses the worker tools in the workspace", async () => {
    fake.enqueue(
      { toolCalls: [toolCall("write_file", { path: "notes/out.txt", content: "hello from a subagent" })] },
      { content: detailed("Wrote notes/out.txt.") },
    );
    const m = manager();
    m.spawn({ task: "Write a greeting to notes/out.txt", origin });

    await waitFor(() => inbound.length === 1);
    expect(await readFile(join(workspace, "notes/out.txt"), "utf8")).toBe("hello from a subagent");
    const toolMessage = fake.requests[1]!.body.messages.find((x) => x.role === "tool");
    expect(toolMessage?.content).toMatch(/notes\/out\.txt/);
    expect(inbound[0]!.content).toContain("completed successfully");
    expect(inbound[0]!.content).toContain("Wrote notes/out.txt.");
  });

  it("reports an LLM failure as failed, in plain words", async () => {
    fake.setHandler(() => ({ status: 500 }));
    const m = manager();
    m.spawn({ task: "Summarise the news", label: "news", origin });

    await waitFor(() => inbound.length === 1);
    const content = inbound[0]!.content;
    expect(content).toContain('[Subagent "news" failed]');
    expect(content).toContain("Task: Summarise the news");
    expect(content).toContain("couldn't reach the language model");
    expect(content).not.toMatch(/fake error|stack/i);
    expect(fake.requests).toHaveLength(2); // maxRetries 1
  });

  it("cancelForSession aborts the running LLM call promptly and publishes nothing", async () => {
    // Far beyond any test's limit: only the abort can end this call.
    fake.enqueue({ content: "too late", delayMs: 600_000 });
    const { log, lines } = captureLog();
    const m = manager({ log });
    // A subagent of another chat, on the same manager, must survive the cancel.
    fake.enqueue({ content: "other chat result", delayMs: 200 });
    m.spawn({ task: "a long job", origin });
    await waitFor(() => fake.requests.length === 1);
    const otherOrigin: Origin = { channel: "slack", chatId: "C1", sessionKey: "slack:C1" };
    m.spawn({ task: "unrelated", origin: otherOrigin });
    await waitFor(() => fake.requests.length === 2);

    expect(m.cancelForSession(origin.sessionKey!)).toBe(1);
    expect(m.listForSession(origin.sessionKey!)).toEqual([]);
    expect(m.listForSession("slack:C1")).toHaveLength(1);

    // The cancelled one settles (its reply would take minutes); the other one reports normally.
    await waitFor(() => inbound.length === 1, 30_000);
    await m.shutdown(60_000);
    expect(lines.some((l) => l.msg === "shutdown: subagents still settling")).toBe(false);
    expect(inbound).toHaveLength(1);
    expect(inbound[0]!.sessionKey).toBe("slack:C1");
    expect(lines.some((l) => l.msg === "subagent cancelled" && l.reason === "cancelled")).toBe(true);
    expect(lines.some((l) => l.msg === "subagent finished" && l.label === "a long job")).toBe(false);
  });

  it("runs at most maxConcurrent at once; the rest wait in order", async () => {
    const events: string[] = [];
    let inflight = 0;
    let maxInflight = 0;
    fake.setHandler(async (req) => {
      const task = lastUserText(req);
      inflight++;
      maxInflight = Math.max(maxInflight, inflight);
      events.push(`start ${task}`);
      // Each is held until the next step happened, so the order is fixed by events, not by timers:
      // A ends once B runs too, B once C took A's slot, C once B's result is out.
      const after = (what: string, cond: () => boolean) => waitFor(cond, 30_000, what);
      if (task === "A") await after("B to start", () => events.includes("start B"));
      if (task === "B") await after("C to start", () => events.includes("start C"));
      if (task === "C") await after("B's result", () => inbound.length === 2);
      events.push(`end ${task}`);
      inflight--;
      return { content: `done ${task}` };
    });
    const m = manager({ maxConcurrent: 2 });
    const results = ["A", "B", "C"].map((task) => m.spawn({ task, origin }));
    expect(results.map((r) => r.queued)).toEqual([false, false, true]);
    expect(m.listForSession(origin.sessionKey!).map((e) => e.label)).toEqual(["A", "B", "C"]);

    await waitFor(() => inbound.length === 3);
    expect(maxInflight).toBe(2);
    // C started only after A, the first to finish, was done.
    expect(events.indexOf("start C")).toBeGreaterThan(events.indexOf("end A"));
    expect(inbound.map((msg) => /Task: (\w)/.exec(msg.content)?.[1])).toEqual(["A", "B", "C"]);
  });

  it("a queued subagent that is cancelled never starts", async () => {
    fake.setHandler((req) => ({ content: detailed(`done ${lastUserText(req)}`), delayMs: 200 }));
    const m = manager({ maxConcurrent: 1 });
    m.spawn({ task: "first", origin });
    const waiting: Origin = { channel: "discord", chatId: "9", sessionKey: "discord:9" };
    const queued = m.spawn({ task: "second", origin: waiting });
    expect(queued.queued).toBe(true);
    expect(m.cancelForSession("discord:9")).toBe(1);

    await waitFor(() => inbound.length === 1);
    await m.shutdown(2000);
    expect(fake.requests.map(lastUserText)).toEqual(["first"]);
    expect(inbound).toHaveLength(1);
    expect(inbound[0]!.content).toContain("done first");
  });

  it("shutdown cancels every subagent, waits for them and refuses new ones", async () => {
    // Far beyond any test's limit: only the cancel can end these calls.
    fake.setHandler(() => ({ content: "never delivered", delayMs: 600_000 }));
    const { log, lines } = captureLog();
    const m = manager({ maxConcurrent: 2, log });
    m.spawn({ task: "one", origin });
    m.spawn({ task: "two", origin: { channel: "slack", chatId: "C1", sessionKey: "slack:C1" } });
    m.spawn({ task: "three (queued)", origin });
    await waitFor(() => fake.requests.length === 2);

    await m.shutdown(60_000);
    // They settled once cancelled; shutdown did not give up on them.
    expect(lines.some((l) => l.msg === "shutdown: subagents still settling")).toBe(false);
    expect(m.listForSession(origin.sessionKey!)).toEqual([]);
    expect(m.listForSession("slack:C1")).toEqual([]);
    expect(inbound).toEqual([]);
    expect(fake.requests).toHaveLength(2);
    expect(() => m.spawn({ task: "late", origin })).toThrow(/shutting down/);
  });

  it("asks once for the details when the result is shorter than about 200 characters", async () => {
    const short = "Done. The report is written and checked.";
    expect(short).toHaveLength(40);
    const details =
      "I read data.csv, summed the amounts per month and wrote the totals to report.md " +
      "(January 120, February 95).";
    fake.enqueue({ content: short }, { content: details }, { content: "an unwanted third call" });
    const m = manager();
    m.spawn({ task: "Write the monthly report", label: "report", origin });
    await waitFor(() => inbound.length === 1);
    expect(fake.requests).toHaveLength(2);
    const followUp = fake.requests[1]!.body.messages;
    expect(followUp.find((msg) => msg.role === "assistant")?.content).toBe(short);
    expect(lastUserText(fake.requests[1]!)).toMatch(/very short.*details/);
    // The details (still under 200 characters) are announced: no second follow-up.
    expect(inbound[0]!.content).toContain(details);
  });

  it("says when the model hit the iteration limit", async () => {
    fake.setHandler((_req, i) => ({ toolCalls: [toolCall("list_dir", { path: `.${"/.".repeat(i)}` })] }));
    const m = manager({ maxIterations: 2 });
    m.spawn({ task: "loop forever", label: "loop", origin });
    await waitFor(() => inbound.length === 1);
    expect(inbound[0]!.content).toContain('[Subagent "loop" failed]');
    expect(inbound[0]!.content).toContain("I stopped after 2 tool steps");
  });
});

describe("defaultLabel", () => {
  it("is the task when short, else its first 30 characters on one line", () => {
    expect(defaultLabel("check the weather")).toBe("check the weather");
    expect(defaultLabel("Research the history of the\nRoman empire in detail")).toBe(
      "Research the history of the Ro…",
    );
  });
});

describe("subagent result through the agent loop", () => {
  it("is answered in the origin session and delivered to the origin chat and thread", async () => {
    const h = await startHarness();
    const m = new SubagentManager({
      provider: h.provider,
      tools: createWorkerTools(h.config, h.workspace),
      bus: h.bus,
      workspace: h.workspace,
      maxConcurrent: 2,
      maxIterations: 5,
      toolResultMaxChars: 4000,
      log: pino({ level: "silent" }),
    });
    try {
      h.fake!.setHandler((req) => {
        const system = String(req.body.messages[0]?.content);
        if (system.startsWith("# Subagent")) return { content: "notes.md has 3 lines." };
        const reported = lastUserText(req).startsWith('[Subagent "count" completed successfully]');
        return { content: reported ? "Your notes have 3 lines." : "unexpected prompt" };
      });
      const chatOrigin: Origin = {
        channel: "test",
        chatId: "c1",
        sessionKey: "test:c1:t9",
        threadId: "t9",
      };
      m.spawn({ task: "Count the lines of notes.md", label: "count", origin: chatOrigin });

      await waitFor(() => h.outbound.some((o) => (o.kind ?? "final") === "final"));
      await h.loop.idle();
      const finals = h.outbound.filter((o) => (o.kind ?? "final") === "final");
      expect(finals).toHaveLength(1);
      expect(finals[0]).toMatchObject({
        channel: "test",
        chatId: "c1",
        content: "Your notes have 3 lines.",
        threadId: "t9",
      });
      const session = await h.sessions.get("test:c1:t9");
      expect(session.messages.map((x) => x.content)).toEqual([
        expect.stringContaining('[Subagent "count" completed successfully]'),
        "Your notes have 3 lines.",
      ]);
    } finally {
      await m.shutdown(2000);
      await h.cleanup();
    }
  });
});
