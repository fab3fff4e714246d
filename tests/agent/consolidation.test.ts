import { mkdtemp, readFile, readdir, rm, stat, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ContextBudget } from "../../src/agent/budget/budget.js";
import { TokenCounter } from "../../src/agent/budget/tokens.js";
import {
  CONSOLIDATION_SYSTEM_PROMPT,
  MEMORY_CUT_NOTE,
  MemoryConsolidator,
  SAVE_MEMORY_TOOL,
  consolidationPrompt,
  consolidationRange,
  formatForConsolidation,
  parseSaveMemory,
  type MemoryConsolidatorOptions,
} from "../../src/agent/consolidation.js";
import { MemoryFiles } from "../../src/agent/memory.js";
import { OpenAIProvider } from "../../src/llm/openai-provider.js";
import type { ChatMessage, ChatResponse, ToolCall, ToolDefinition } from "../../src/llm/types.js";
import type { Session } from "../../src/sessions/session.js";
import { SessionStore } from "../../src/sessions/store.js";
import { FakeOpenAI, toolCall, type FakeReply, type RecordedRequest } from "../fakes/openai-server.js";
import { createGate } from "../helpers/gate.js";
import { captureLog } from "../helpers/log.js";
import { waitFor } from "../helpers/wait.js";

// ---------------------------------------------------------------- pure pieces

const call = (name: string, args: Record<string, unknown>, argumentsError?: string): ToolCall => ({
  id: "c1",
  name,
  arguments: args,
  rawArguments: JSON.stringify(args),
  ...(argumentsError ? { argumentsError } : {}),
});
const reply = (toolCalls: ToolCall[], content: string | null = null): ChatResponse => ({
  content,
  toolCalls,
  finishReason: toolCalls.length ? "tool_calls" : "stop",
});

describe("formatForConsolidation", () => {
  it("writes one line per message with text, stamp, role and tools", () => {
    const msgs: ChatMessage[] = [
      { role: "user", content: "book a train to Lyon", timestamp: "2026-03-01T09:05:33.123000" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "t", type: "function", function: { name: "exec", arguments: "{}" } }],
        timestamp: "2026-03-01T09:05:40.000000",
      },
      { role: "tool", content: "done", tool_call_id: "t", name: "exec" },
      {
        role: "assistant",
        content: "Booked the 10:04.",
        tools_used: ["exec", "web_search"],
        timestamp: "2026-03-01T09:06:00.000000",
      },
      {
        role: "user",
        content: [
          { type: "text", text: "look at this" },
          { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
          { type: "text", text: "and this" },
        ],
        timestamp: "2026-03-01T09:07:00Z",
      },
      { role: "user", content: "", timestamp: "2026-03-01T09:08:00" },
      { role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] },
    ];
    expect(formatForConsolidation(msgs)).toBe(
      [
        "[2026-03-01 09:05] USER: book a train to Lyon",
        "[?] TOOL: done",
        "[2026-03-01 09:06] ASSISTANT [tools: exec, web_search]: Booked the 10:04.",
        "[2026-03-01 09:07] USER: look at this\nand this",
      ].join("\n"),
    );
  });

  it("is empty for no messages", () => {
    expect(formatForConsolidation([])).toBe("");
  });
});

describe("consolidationPrompt", () => {
  it("has the current memory and the conversation, (empty) when there is no memory", () => {
    const msgs: ChatMessage[] = [{ role: "user", content: "hi", timestamp: "2026-01-02T03:04:05" }];
    expect(consolidationPrompt("", msgs)).toBe(
      "Process this conversation and call the save_memory tool with your consolidation.\n\n" +
        "## Current Long-term Memory\n(empty)\n\n## Conversation to Process\n[2026-01-02 03:04] USER: hi",
    );
    expect(consolidationPrompt("- likes tea", msgs)).toContain(
      "## Current Long-term Memory\n- likes tea\n\n",
    );
  });
});

describe("consolidationRange", () => {
  it("starts at the window and keeps the newest half", () => {
    expect(consolidationRange(9, 0, 10)).toBeNull();
    expect(consolidationRange(10, 0, 10)).toEqual({ start: 0, end: 5 });
    expect(consolidationRange(11, 0, 10)).toEqual({ start: 0, end: 6 });
    expect(consolidationRange(14, 5, 10)).toBeNull();
    expect(consolidationRange(15, 5, 10)).toEqual({ start: 5, end: 10 });
    expect(consolidationRange(7, 0, 7)).toEqual({ start: 0, end: 4 });
  });

  it("tolerates a pointer beyond the end and a bad window", () => {
    expect(consolidationRange(3, 10, 2)).toBeNull();
    expect(consolidationRange(10, -4, 4)).toEqual({ start: 0, end: 8 });
    expect(consolidationRange(10, 0, 0)).toBeNull();
  });
});

describe("parseSaveMemory", () => {
  it("accepts a valid call", () => {
    const r = parseSaveMemory(reply([call("save_memory", { history_entry: "x", memory_update: "m" })]));
    expect(r).toEqual({ ok: true, args: { history_entry: "x", memory_update: "m" } });
  });

  it("refuses a reply without the call, another tool, bad or unparsable arguments", () => {
    const reason = (r: ReturnType<typeof parseSaveMemory>) => (r.ok ? "ok" : r.reason);
    expect(reason(parseSaveMemory(reply([], "I summarised it")))).toBe("the model did not call save_memory");
    expect(reason(parseSaveMemory(reply([call("exec", {})])))).toBe(
      "the model called exec instead of save_memory",
    );
    expect(reason(parseSaveMemory(reply([call("save_memory", { history_entry: "x" })])))).toMatch(
      /invalid arguments \(memory_update: /,
    );
    expect(
      reason(parseSaveMemory(reply([call("save_memory", { history_entry: "  ", memory_update: "m" })]))),
    ).toMatch(/history_entry: history_entry is empty/);
    expect(
      reason(parseSaveMemory(reply([call("save_memory", { history_entry: 3, memory_update: "m" })]))),
    ).toMatch(/history_entry/);
    expect(reason(parseSaveMemory(reply([call("save_memory", {}, "not valid JSON")])))).toBe(
      "not valid JSON",
    );
  });
});

describe("SAVE_MEMORY_TOOL", () => {
  it("is nanobot's save_memory with both parameters required", () => {
    expect(SAVE_MEMORY_TOOL.function.name).toBe("save_memory");
    const params = SAVE_MEMORY_TOOL.function.parameters as {
      properties: Record<string, { type: string; description: string }>;
      required: string[];
    };
    expect(params.required).toEqual(["history_entry", "memory_update"]);
    expect(params.properties.history_entry?.description).toMatch(/\[YYYY-MM-DD HH:MM\]/);
    expect(params.properties.memory_update?.description).toMatch(/Return unchanged if nothing new/);
  });
});

// ---------------------------------------------------------------- the consolidator

let fake: FakeOpenAI;
let workspace: string;
let store: SessionStore;
let memory: MemoryFiles;
let clock: Date;
let live: MemoryConsolidator[];

beforeEach(async () => {
  fake = await FakeOpenAI.start();
  workspace = await mkdtemp(join(tmpdir(), "palaver-consolidation-"));
  store = new SessionStore(join(workspace, "sessions"), pino({ level: "silent" }));
  memory = new MemoryFiles(workspace);
  clock = new Date(2026, 2, 1, 12, 0);
  live = [];
});
afterEach(async () => {
  for (const c of live) await c.drain(1_000);
  await store.flush();
  await fake.close();
  await rm(workspace, { recursive: true, force: true });
});

function consolidator(over: Partial<MemoryConsolidatorOptions> = {}): MemoryConsolidator {
  const provider = new OpenAIProvider({
    apiKey: "k",
    baseURL: fake.baseURL,
    model: "m",
    maxTokens: 100,
    temperature: 0,
    timeoutMs: 5000,
    maxRetries: 0,
    retryBaseMs: 1,
    retryMaxMs: 1,
    log: pino({ level: "silent" }),
  });
  const c = new MemoryConsolidator({
    provider,
    memory,
    sessions: store,
    memoryWindow: 10,
    log: pino({ level: "silent" }),
    now: () => clock,
    ...over,
  });
  live.push(c);
  return c;
}

/** Message i says "msg i"; stamped one minute apart from 10:00. */
function msgs(from: number, to: number): ChatMessage[] {
  const out: ChatMessage[] = [];
  for (let i = from; i < to; i++) {
    out.push({
      role: i % 2 === 0 ? "user" : "assistant",
      content: `msg ${i}`,
      timestamp: `2026-03-01T10:${String(i).padStart(2, "0")}:00.000000`,
    });
  }
  return out;
}

async function session(n: number, key = "cli:direct"): Promise<Session> {
  const s = await store.get(key);
  await store.append(s, msgs(0, n));
  return s;
}

const save = (history_entry: string, memory_update: string, delayMs?: number): FakeReply => ({
  toolCalls: [toolCall("save_memory", { history_entry, memory_update })],
  ...(delayMs ? { delayMs } : {}),
});

const promptOf = (req: RecordedRequest | undefined): string => {
  const content = req?.body.messages[1]?.content;
  return typeof content === "string" ? content : "";
};

const readOr = (path: string): Promise<string | null> => readFile(path, "utf8").catch(() => null);

async function reloaded(key = "cli:direct"): Promise<Session> {
  await store.flush();
  return new SessionStore(join(workspace, "sessions"), pino({ level: "silent" })).get(key);
}

describe("MemoryConsolidator.maybeConsolidate", () => {
  it("does nothing below the window", async () => {
    const c = consolidator();
    const s = await session(9);
    c.maybeConsolidate(s);
    expect(c.isRunning(s.key)).toBe(false);
    await c.drain(1_000);
    expect(fake.requests).toHaveLength(0);
    expect(s.lastConsolidated).toBe(0);
    expect(await readOr(memory.paths.history)).toBeNull();
  });

  it("at the window consolidates the older half in the background and persists the pointer", async () => {
    const c = consolidator();
    const s = await session(10);
    await memory.writeMemory("# Memory\n- likes tea\n");
    fake.enqueue(
      save("[2026-03-01 10:04] Talked about msgs 0-4.", "# Memory\n- likes tea\n- talked about msgs\n"),
    );

    c.maybeConsolidate(s);
    expect(c.isRunning(s.key)).toBe(true);
    await c.drain(30_000);
    expect(c.isRunning(s.key)).toBe(false);

    expect(fake.requests).toHaveLength(1);
    const body = fake.requests[0]!.body;
    expect(body.messages[0]).toMatchObject({ role: "system", content: CONSOLIDATION_SYSTEM_PROMPT });
    expect(body.tools?.map((t) => t.function.name)).toEqual(["save_memory"]);
    expect(body.tools?.[0]?.function.parameters).toEqual(SAVE_MEMORY_TOOL.function.parameters);
    const prompt = promptOf(fake.requests[0]);
    expect(prompt).toContain("## Current Long-term Memory\n# Memory\n- likes tea\n");
    expect(prompt).toContain(
      "## Conversation to Process\n[2026-03-01 10:00] USER: msg 0\n[2026-03-01 10:01] ASSISTANT: msg 1\n",
    );
    expect(prompt).toContain("[2026-03-01 10:04] USER: msg 4");
    expect(prompt).not.toContain("msg 5");

    expect(await readFile(memory.paths.history, "utf8")).toBe(
      "[2026-03-01 10:04] Talked about msgs 0-4.\n\n",
    );
    expect(await memory.readMemory()).toBe("# Memory\n- likes tea\n- talked about msgs\n");
    expect(s.lastConsolidated).toBe(5);
    expect(s.history(100).map((m) => m.content)).toEqual(["msg 6", "msg 7", "msg 8", "msg 9"]);

    const again = await reloaded();
    expect(again.lastConsolidated).toBe(5);
    expect(again.messages).toHaveLength(10);
    // The atomic MEMORY.md write leaves no temp file behind.
    expect((await readdir(memory.paths.dir)).sort()).toEqual(["HISTORY.md", "MEMORY.md"]);
  });

  it("stamps a history entry that has no stamp with the injected clock", async () => {
    const c = consolidator();
    const s = await session(10);
    fake.enqueue(save("Talked about trains.", "- facts\n"));
    c.maybeConsolidate(s);
    await c.drain(30_000);
    expect(await readFile(memory.paths.history, "utf8")).toBe("[2026-03-01 12:00] Talked about trains.\n\n");
  });

  it("returns at once while a slow LLM works, and a second call meanwhile is a no-op", async () => {
    const c = consolidator();
    const s = await session(10);
    // The LLM answers only when the gate opens: everything before that happens "meanwhile".
    const gate = createGate();
    fake.setHandler(async () => {
      await gate.opened;
      return save("[2026-03-01 10:04] slow.", "- slow\n");
    });

    c.maybeConsolidate(s); // synchronous: it returns before the LLM is even asked
    expect(s.lastConsolidated).toBe(0);
    expect(c.isRunning(s.key)).toBe(true);

    await store.append(s, msgs(10, 12));
    c.maybeConsolidate(s);
    c.maybeConsolidate(s);
    gate.open();
    await c.drain(30_000);

    expect(fake.requests).toHaveLength(1);
    expect(s.lastConsolidated).toBe(5);
  });

  it("keeps messages appended during a slow consolidation unconsolidated", async () => {
    const c = consolidator();
    const s = await session(10);
    const gate = createGate();
    fake.setHandler(async () => {
      await gate.opened;
      return save("[2026-03-01 10:04] first half.", "- m\n");
    });
    c.maybeConsolidate(s);
    // Wait until the request reached the server, then append while it is held.
    await waitFor(() => fake.requests.length === 1, 30_000, "the consolidation request");
    await store.append(s, msgs(10, 13));
    gate.open();
    await c.drain(30_000);

    expect(promptOf(fake.requests[0])).not.toContain("msg 5");
    expect(s.lastConsolidated).toBe(5);
    expect(s.history(100).map((m) => m.content)).toEqual([
      "msg 6",
      "msg 7",
      "msg 8",
      "msg 9",
      "msg 10",
      "msg 11",
      "msg 12",
    ]);
    const again = await reloaded();
    expect(again.messages).toHaveLength(13);
    expect(again.lastConsolidated).toBe(5);
  });

  it("changes nothing when the model does not call the tool, and retries after the cool-down", async () => {
    const { log, lines: records } = captureLog();
    const c = consolidator({ log });
    const s = await session(10);
    await memory.writeMemory("- old\n");
    fake.enqueue({ content: "Here is a summary instead." });

    c.maybeConsolidate(s);
    await c.drain(30_000);
    expect(fake.requests).toHaveLength(1);
    expect(s.lastConsolidated).toBe(0);
    expect(await memory.readMemory()).toBe("- old\n");
    expect(await readOr(memory.paths.history)).toBeNull();
    expect((await reloaded()).lastConsolidated).toBe(0);
    expect(records.some((r) => r.level === 40 && /did not call save_memory/.test(String(r.msg)))).toBe(true);

    // Within the cool-down: no new request.
    clock = new Date(clock.getTime() + 59_000);
    c.maybeConsolidate(s);
    expect(c.isRunning(s.key)).toBe(false);
    await c.drain(1_000);
    expect(fake.requests).toHaveLength(1);

    clock = new Date(clock.getTime() + 2_000);
    fake.enqueue(save("[2026-03-01 10:04] retried.", "- old\n- new\n"));
    c.maybeConsolidate(s);
    await c.drain(30_000);
    expect(fake.requests).toHaveLength(2);
    expect(s.lastConsolidated).toBe(5);
    expect(await memory.readMemory()).toBe("- old\n- new\n");
    expect(await readFile(memory.paths.history, "utf8")).toBe("[2026-03-01 10:04] retried.\n\n");
  });

  it("changes nothing when the LLM fails, and retries after the cool-down", async () => {
    const { log, lines: records } = captureLog();
    const c = consolidator({ log, failureCooldownMs: 10_000 });
    const s = await session(10);
    fake.enqueue({ status: 500 });

    c.maybeConsolidate(s);
    await c.drain(30_000);
    expect(fake.requests).toHaveLength(1);
    expect(s.lastConsolidated).toBe(0);
    expect(await readOr(memory.paths.memory)).toBeNull();
    expect(await readOr(memory.paths.history)).toBeNull();
    expect(records.some((r) => r.level === 40 && /memory consolidation failed/.test(String(r.msg)))).toBe(
      true,
    );

    c.maybeConsolidate(s);
    await c.drain(1_000);
    expect(fake.requests).toHaveLength(1);

    clock = new Date(clock.getTime() + 10_000);
    fake.enqueue(save("[2026-03-01 10:04] ok now.", "- m\n"));
    c.maybeConsolidate(s);
    await c.drain(30_000);
    expect(fake.requests).toHaveLength(2);
    expect(s.lastConsolidated).toBe(5);
  });

  it("changes nothing on invalid arguments", async () => {
    const c = consolidator();
    const s = await session(10);
    fake.enqueue(
      { toolCalls: [toolCall("save_memory", { history_entry: "x" })] },
      { toolCalls: [toolCall("save_memory", "{not json")] },
    );
    c.maybeConsolidate(s);
    await c.drain(30_000);
    clock = new Date(clock.getTime() + 60_000);
    c.maybeConsolidate(s);
    await c.drain(30_000);
    expect(fake.requests).toHaveLength(2);
    expect(s.lastConsolidated).toBe(0);
    expect(await readOr(memory.paths.memory)).toBeNull();
    expect(await readOr(memory.paths.history)).toBeNull();
  });

  it("leaves MEMORY.md alone when memory_update equals it or is empty", async () => {
    const c = consolidator({ memoryWindow: 4 });
    const s = await session(4);
    await memory.writeMemory("- same\n");
    const before = await stat(memory.paths.memory);
    fake.enqueue(save("[2026-03-01 10:01] nothing new.", "- same\n"));
    c.maybeConsolidate(s);
    await c.drain(30_000);
    expect(s.lastConsolidated).toBe(2);
    // writeMemory renames a new file into place: an unchanged inode means no write.
    expect((await stat(memory.paths.memory)).ino).toBe(before.ino);

    await store.append(s, msgs(4, 6));
    fake.enqueue(save("[2026-03-01 10:03] still nothing.", "  \n"));
    c.maybeConsolidate(s);
    await c.drain(30_000);
    expect(s.lastConsolidated).toBe(4);
    expect((await stat(memory.paths.memory)).ino).toBe(before.ino);
    expect(await memory.readMemory()).toBe("- same\n");
    expect(await readFile(memory.paths.history, "utf8")).toBe(
      "[2026-03-01 10:01] nothing new.\n\n[2026-03-01 10:03] still nothing.\n\n",
    );
  });

  it("runs sessions independently", async () => {
    const c = consolidator();
    const a = await session(10, "telegram:1");
    const b = await session(10, "telegram:2");
    fake.setHandler(() => save("[2026-03-01 10:04] e.", "- m\n", 100));
    c.maybeConsolidate(a);
    c.maybeConsolidate(b);
    expect(c.isRunning("telegram:1") && c.isRunning("telegram:2")).toBe(true);
    await c.drain(30_000);
    expect(fake.requests).toHaveLength(2);
    expect([a.lastConsolidated, b.lastConsolidated]).toEqual([5, 5]);
  });

  it("does not move the pointer of a session cleared meanwhile", async () => {
    const c = consolidator();
    const s = await session(10);
    const gate = createGate();
    fake.setHandler(async () => {
      await gate.opened;
      return save("[2026-03-01 10:04] e.", "- m\n");
    });
    c.maybeConsolidate(s);
    await waitFor(() => fake.requests.length === 1, 30_000, "the consolidation request");
    await store.clear(s);
    await store.append(s, msgs(0, 2));
    gate.open();
    await c.drain(30_000);
    expect(s.lastConsolidated).toBe(0);
    expect((await reloaded()).lastConsolidated).toBe(0);
  });
});

describe("MemoryConsolidator: what stays in memory", () => {
  it("lets go of the consolidated messages; the file keeps them and the next consolidation goes on from there", async () => {
    const c = consolidator();
    const s = await session(10);
    fake.enqueue(save("[2026-03-01 10:04] msgs 0-4.", "- a\n"));
    c.maybeConsolidate(s);
    await c.drain(5_000);
    expect(s.lastConsolidated).toBe(5);
    expect(s.forgotten).toBe(5);
    expect(s.messages.map((m) => m.content)).toEqual(["msg 5", "msg 6", "msg 7", "msg 8", "msg 9"]);
    expect(s.history(100).map((m) => m.content)).toEqual(["msg 6", "msg 7", "msg 8", "msg 9"]);

    // Five more: ten unconsolidated again, the older half of them goes next.
    await store.append(s, msgs(10, 15));
    fake.enqueue(save("[2026-03-01 10:09] msgs 5-9.", "- a\n"));
    c.maybeConsolidate(s);
    await c.drain(5_000);
    const prompt = promptOf(fake.requests[1]);
    expect(prompt).toContain("USER: msg 6");
    expect(prompt).toContain("ASSISTANT: msg 9");
    expect(prompt).not.toContain("msg 4");
    expect(prompt).not.toContain("msg 10");
    expect(s.lastConsolidated).toBe(10);
    expect(s.forgotten).toBe(10);
    expect(s.messages).toHaveLength(5);

    const again = await reloaded();
    expect(again.lastConsolidated).toBe(10);
    expect(again.messages.map((m) => m.content)).toEqual(msgs(0, 15).map((m) => m.content));
  });
});

describe("MemoryConsolidator.archiveAll", () => {
  it("archives every unconsolidated message and sets the pointer to the end", async () => {
    const c = consolidator();
    const s = await session(7);
    fake.enqueue(save("[2026-03-01 10:06] all of it.", "- all\n"));
    await c.archiveAll(s);
    expect(fake.requests).toHaveLength(1);
    const prompt = promptOf(fake.requests[0]);
    expect(prompt).toContain("USER: msg 0");
    expect(prompt).toContain("USER: msg 6");
    expect(s.lastConsolidated).toBe(7);
    expect((await reloaded()).lastConsolidated).toBe(7);
    expect(await memory.readMemory()).toBe("- all\n");
    expect(await readFile(memory.paths.history, "utf8")).toBe("[2026-03-01 10:06] all of it.\n\n");
    // It archives; clearing is the caller's job (memory lets go of them, the file keeps them).
    expect(s.total).toBe(7);
    expect((await reloaded()).messages).toHaveLength(7);
  });

  it("resolves without a request when there is nothing to archive", async () => {
    const c = consolidator();
    const empty = await store.get("cli:empty");
    await c.archiveAll(empty);
    const s = await session(4);
    s.lastConsolidated = 4;
    await c.archiveAll(s);
    expect(fake.requests).toHaveLength(0);
  });

  it("waits for a running consolidation and then archives the rest", async () => {
    const c = consolidator();
    const s = await session(12);
    fake.enqueue(
      save("[2026-03-01 10:06] first.", "- one\n", 200),
      save("[2026-03-01 10:11] second.", "- one\n- two\n"),
    );
    c.maybeConsolidate(s);
    await c.archiveAll(s);
    expect(fake.requests).toHaveLength(2);
    // 12 messages, window 10: the background run takes 0-6, archiveAll the rest.
    const first = promptOf(fake.requests[0]);
    expect(first).toContain("USER: msg 6");
    expect(first).not.toContain("msg 7");
    const second = promptOf(fake.requests[1]);
    expect(second).toContain("## Current Long-term Memory\n- one\n");
    expect(second).toContain("## Conversation to Process\n[2026-03-01 10:07] ASSISTANT: msg 7\n");
    expect(second).toContain("ASSISTANT: msg 11");
    expect(second).not.toContain("msg 6");
    expect(s.lastConsolidated).toBe(12);
    expect(await readFile(memory.paths.history, "utf8")).toBe(
      "[2026-03-01 10:06] first.\n\n[2026-03-01 10:11] second.\n\n",
    );
  });

  it("throws when the model does not call the tool, changing nothing", async () => {
    const c = consolidator();
    const s = await session(6);
    await memory.writeMemory("- keep\n");
    fake.enqueue({ content: "no" });
    await expect(c.archiveAll(s)).rejects.toThrow(
      /^Memory archival failed: the model did not call save_memory$/,
    );
    expect(s.lastConsolidated).toBe(0);
    expect((await reloaded()).lastConsolidated).toBe(0);
    expect(await memory.readMemory()).toBe("- keep\n");
    expect(await readOr(memory.paths.history)).toBeNull();
    expect(c.isRunning(s.key)).toBe(false);
  });

  it("throws when the LLM fails, and ignores the background cool-down", async () => {
    const c = consolidator();
    const s = await session(10);
    fake.enqueue({ status: 500 }, { status: 500 });
    c.maybeConsolidate(s);
    await c.drain(30_000);
    await expect(c.archiveAll(s)).rejects.toThrow(/^Memory archival failed: /);
    expect(fake.requests).toHaveLength(2);
    expect(s.lastConsolidated).toBe(0);
  });
});

describe("MemoryConsolidator.drain", () => {
  it("returns after the bound and cancels a consolidation still running", async () => {
    const c = consolidator();
    const s = await session(10);
    // Far beyond any test's limit: only drain's own bound can make it return.
    fake.enqueue(save("[2026-03-01 10:04] never.", "- never\n", 600_000));
    c.maybeConsolidate(s);
    await c.drain(50);
    // Cancelled: it settles, having written nothing.
    await waitFor(() => !c.isRunning(s.key), 30_000, "the cancelled consolidation to settle");
    expect(s.lastConsolidated).toBe(0);
    expect(await readOr(memory.paths.history)).toBeNull();
  });
});

it("uses the existing memory folder without leaving temp files next to other files", async () => {
  await mkdir(memory.paths.dir, { recursive: true });
  await writeFile(join(memory.paths.dir, "notes.txt"), "mine");
  const c = consolidator({ memoryWindow: 2 });
  const s = await session(2);
  fake.enqueue(save("[2026-03-01 10:00] e.", "- m\n"));
  c.maybeConsolidate(s);
  await c.drain(30_000);
  expect((await readdir(memory.paths.dir)).sort()).toEqual(["HISTORY.md", "MEMORY.md", "notes.txt"]);
});

describe("MemoryConsolidator fitted to the context budget", () => {
  const BUDGET = 12_000;
  const settings = {
    model: "fake-model",
    windowTokens: 16_000,
    budgetTokens: BUDGET,
    consolidationTokens: 8_000,
  };
  /** Message i starts with "msg-i:" and is about 2000 characters long. */
  const long = (from: number, to: number): ChatMessage[] =>
    msgs(from, to).map((m, i) => ({ ...m, content: `msg-${from + i}: ${"words of the chat ".repeat(110)}` }));

  it("sends a 10 MB MEMORY.md capped and a long history in chunks, each request within the budget, and never rewrites the cut MEMORY.md", async () => {
    const bigMemory = `# Memory\n${"- a fact worth keeping, one of very many\n".repeat(256 * 1024)}`;
    expect(bigMemory.length).toBeGreaterThan(10 * 1024 * 1024);
    await memory.writeMemory(bigMemory);
    const { log, lines } = captureLog("info");
    const c = consolidator({ budget: new ContextBudget(settings), log });
    const s = await store.get("cli:direct");
    const history = long(0, 40);
    // One message too long for any request on its own: it is cut, not lost or sent whole.
    history[20] = { ...history[20]!, content: `msg-20: ${"x".repeat(200_000)}` };
    await store.append(s, history);
    fake.setHandler(() =>
      save("[2026-03-01 10:00] part of the chat.", "# Memory\n- a rewrite of the part shown\n"),
    );

    await c.archiveAll(s);

    expect(fake.requests.length).toBeGreaterThan(3);
    const counter = new TokenCounter("fake-model");
    for (const req of fake.requests) {
      const tokens = counter.prompt(req.body.messages as ChatMessage[], req.body.tools as ToolDefinition[]);
      expect(tokens).toBeLessThanOrEqual(BUDGET);
      expect(promptOf(req)).toContain(MEMORY_CUT_NOTE);
    }
    // Every message went to exactly one request, in order.
    const seen = fake.requests.flatMap((r) =>
      [...promptOf(r).matchAll(/\bmsg-(\d+):/g)].map((m) => Number(m[1])),
    );
    expect(seen).toEqual([...Array(40).keys()]);
    // The model saw only a part of MEMORY.md: its rewrite is not applied, the history entries are kept.
    expect(await memory.readMemory()).toBe(bigMemory);
    expect((await readFile(memory.paths.history, "utf8")).match(/part of the chat/g)).toHaveLength(
      fake.requests.length,
    );
    expect(s.lastConsolidated).toBe(40);
    expect((await reloaded()).lastConsolidated).toBe(40);

    // Reported once, with what to do, however many requests and consolidations follow.
    await store.append(s, long(40, 44));
    await c.archiveAll(s);
    const warnings = lines.filter((l) => l.level === 40 && String(l.msg).includes("MEMORY.md is"));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.msg).toMatch(
      /memory\/MEMORY\.md is \d+ KB .*over the 32000 characters .*Trim it by hand/,
    );
  });

  it("rewrites a MEMORY.md under the cap as before, and splits a long history by the budget", async () => {
    await memory.writeMemory("# Memory\n- likes tea\n");
    const c = consolidator({ budget: new ContextBudget({ ...settings, budgetTokens: 2_000 }) });
    const s = await store.get("cli:direct");
    await store.append(s, long(0, 6));
    fake.setHandler((_req, i) =>
      save(`[2026-03-01 10:00] part ${i}.`, `# Memory\n- likes tea\n- part ${i}\n`),
    );
    await c.archiveAll(s);
    expect(fake.requests.length).toBeGreaterThan(1);
    for (const req of fake.requests) expect(promptOf(req)).not.toContain(MEMORY_CUT_NOTE);
    // Each request saw the MEMORY.md the previous one wrote.
    expect(promptOf(fake.requests[1])).toContain("- part 0");
    expect(await memory.readMemory()).toBe(`# Memory\n- likes tea\n- part ${fake.requests.length - 1}\n`);
    expect(s.lastConsolidated).toBe(6);
  });
});
