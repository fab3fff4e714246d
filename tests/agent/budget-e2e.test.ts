/**
 * The context budget end to end: the real agent and the real openai SDK
 * against a fake LLM that refuses prompts over its context limit (counted with
 * the same o200k tokenizer) with a real provider's 400.
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { LAST_PROMPT_TOKENS } from "../../src/agent/status-text.js";
import type { ChatMessage } from "../../src/llm/types.js";
import type { OverflowShape } from "../fakes/context-limit.js";
import { lastUserText, toolCall, type FakeHandler, type RecordedRequest } from "../fakes/openai-server.js";
import { startHarness, type Harness } from "../helpers/agent-harness.js";
import { commonPrefix, pairingProblems, text } from "./budget-helpers.js";

const FILES = 10;
const FILE_CHARS = 20_000;

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.cleanup();
  harness = undefined;
});

/** A harness on gpt-4o-mini with a `window`-token window (budget 0.6 of it), big file results allowed. */
async function start(
  window: number,
  config: Record<string, unknown> = {},
): Promise<{ h: Harness; files: string[] }> {
  const h = await startHarness({
    config: {
      agents: {
        defaults: {
          model: "gpt-4o-mini",
          contextWindows: { "gpt-4o-mini": window },
          maxTokens: 4000,
          memoryWindow: 10_000,
          ...config,
        },
      },
      tools: { toolResultMaxChars: 30_000 },
    },
  });
  harness = h;
  const files: string[] = [];
  for (let i = 0; i < FILES; i++) {
    files.push(text(FILE_CHARS, i + 7));
    await writeFile(join(h.workspace, `big-${i}.txt`), files[i]!);
  }
  h.fake!.setHandler(agentLike);
  return { h, files };
}

const isConsolidation = (req: RecordedRequest) =>
  req.body.tools?.some((t) => t.function.name === "save_memory");

/** Reads the file a message names, then says how long it was; answers consolidations with save_memory. */
const agentLike: FakeHandler = (req) => {
  if (isConsolidation(req)) {
    return {
      toolCalls: [
        toolCall("save_memory", {
          history_entry: "[2026-01-01 10:00] The user had many files read.",
          memory_update: "# Memory\n\nThe user reads big files.",
        }),
      ],
    };
  }
  const last = req.body.messages.at(-1)!;
  if (last.role === "tool") return { content: `read ${String(last.content).length} characters` };
  const n = Number(/file (\d+)/.exec(lastUserText(req))?.[1] ?? 0);
  return { toolCalls: [toolCall("read_file", { path: `big-${n % FILES}.txt` })] };
};

describe("context budget, end to end", () => {
  it("keeps a 200-turn chat with 20 KB tool results working; the session keeps everything", async () => {
    // 64k: the six newest results (about 4,000 tokens each) fit the budget (38,400) with room to spare.
    const { h, files } = await start(64_000);
    await h.fake!.limitContext({ maxTokens: 60_000 });
    for (let i = 0; i < 200; i++) {
      const reply = await h.ask("c1", `read file ${i}`);
      expect(reply.content).toBe(`read ${FILE_CHARS} characters`);
    }
    await h.consolidator.drain(5000);
    const fake = h.fake!;
    expect(fake.overflows).toEqual([]);

    // Every prompt sent: no tool call without its result, no result without its call.
    for (const req of fake.requests) expect(pairingProblems(req.body.messages as ChatMessage[])).toEqual([]);

    // The stored session holds every tool result whole.
    const session = await h.sessions.get("test:c1");
    const lines = (await readFile(h.sessions.pathFor("test:c1"), "utf8")).trim().split("\n");
    const stored = lines.map((l) => JSON.parse(l) as ChatMessage & { _type?: string });
    const results = stored.filter((m) => m.role === "tool");
    expect(results).toHaveLength(200);
    results.forEach((m, i) => expect(m.content).toBe(files[i % FILES]));

    // Consolidated by tokens: 800 messages are far below memoryWindow (10,000).
    expect(fake.requests.filter(isConsolidation).length).toBeGreaterThan(0);
    expect(session.lastConsolidated).toBeGreaterThan(0);
    expect(session.messages.length).toBeLessThan(10_000);
    expect(await readFile(join(h.workspace, "memory", "MEMORY.md"), "utf8")).toContain("big files");

    // The prompt's prefix stays byte-identical between calls while the history's start is the same.
    const prompts = fake.requests
      .filter((r) => !isConsolidation(r))
      .map((r) => r.body.messages as ChatMessage[]);
    const shares: number[] = [];
    for (let i = 1; i < prompts.length; i++) {
      const [a, b] = [prompts[i - 1]!, prompts[i]!];
      // Consolidated in between: MEMORY.md (in the system prompt) or the history's start moved.
      if (JSON.stringify(a.slice(0, 2)) !== JSON.stringify(b.slice(0, 2))) continue;
      // At least the system prompt, the first user message and the first call (the first thing stubbed).
      expect(commonPrefix(a, b), `prompts ${i - 1} and ${i}`).toBeGreaterThanOrEqual(3);
      shares.push(commonPrefix(a, b) / a.length);
    }
    expect(shares.length).toBeGreaterThanOrEqual(200); // at least the two calls of every turn
    // Mostly the whole previous prompt: only stubbing just before a consolidation moves it.
    expect(shares.reduce((x, y) => x + y, 0) / shares.length).toBeGreaterThan(0.6);

    // /status tells how full the window was.
    expect(session.metadata[LAST_PROMPT_TOKENS]).toBeGreaterThan(1000);
    const status = await h.ask("c1", "/status");
    expect(status.content).toMatch(/Context: last prompt [\d,]+ tokens of a 64,000-token window \(\d+ %\)/);
  }, 180_000);

  it.each<OverflowShape>(["openai", "openrouter", "vllm", "ollama", "anthropic"])(
    "recovers from a %s context overflow by retrying once with half the budget",
    async (shape) => {
      const { h } = await start(32_000, { consolidationRatio: 0.95 });
      // Below the budget (19,200): the budget's fit is refused, its half is not.
      await h.fake!.limitContext({ maxTokens: 14_000, shape });
      for (let i = 0; i < 6; i++) {
        const reply = await h.ask("c1", `read file ${i}`);
        expect(reply.content).toBe(`read ${FILE_CHARS} characters`);
      }
      const { overflows } = h.fake!;
      expect(overflows.length).toBeGreaterThan(0);
      // Each refusal was followed by one retry that went through.
      for (const index of overflows) expect(overflows).not.toContain(index + 1);
    },
    60_000,
  );

  it("gives up after one retry and says plainly that /new starts fresh", async () => {
    const { h } = await start(32_000);
    // Not even the system prompt fits.
    await h.fake!.limitContext({ maxTokens: 50 });
    const reply = await h.ask("c1", "hello");
    expect(reply.content).toMatch(/no longer fits/);
    expect(reply.content).toContain("/new");
    expect(h.fake!.requests).toHaveLength(2);
    expect(h.fake!.overflows).toEqual([0, 1]);
    // The failed turn saved nothing.
    expect((await h.sessions.get("test:c1")).messages).toEqual([]);
  }, 60_000);
});
