/** Subagents fit their prompts with their own budget: a long task with big tool results never overflows. */
import { mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, expect, it } from "vitest";
import { ContextBudget } from "../../src/agent/budget/budget.js";
import { SubagentManager } from "../../src/agent/subagents.js";
import { createWorkerTools } from "../../src/agent/tools/index.js";
import { MessageBus } from "../../src/bus/bus.js";
import type { InboundMessage } from "../../src/bus/types.js";
import { ConfigSchema } from "../../src/config/schema.js";
import { FakeOpenAI, toolCall } from "../fakes/openai-server.js";
import { fakeProvider } from "../helpers/fake-provider.js";
import { waitFor } from "../helpers/wait.js";
import { text } from "./budget-helpers.js";

const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

it("a subagent reading twelve big files stays inside its budget and finishes", async () => {
  const fake = await FakeOpenAI.start();
  cleanup.push(() => fake.close());
  const workspace = await realpath(await mkdtemp(join(tmpdir(), "palaver-budget-sub-")));
  cleanup.push(() => rm(workspace, { recursive: true, force: true }));
  for (let i = 0; i < 12; i++) await writeFile(join(workspace, `part-${i}.txt`), text(4000, i + 3));
  // Twelve results of about 800 tokens are more than the fake takes; the budget keeps the newest six.
  await fake.limitContext({ maxTokens: 9000 });
  fake.setHandler((req) => {
    const read = req.body.messages.filter((m) => m.role === "tool").length;
    return read < 12
      ? { toolCalls: [toolCall("read_file", { path: `part-${read}.txt` })] }
      : { content: `read ${read} parts` };
  });
  const bus = new MessageBus();
  const inbound: InboundMessage[] = [];
  bus.onInbound((msg) => inbound.push(msg));
  const manager = new SubagentManager({
    provider: fakeProvider(fake, { maxRetries: 0, name: "custom" }),
    tools: createWorkerTools(ConfigSchema.parse({}), workspace),
    bus,
    workspace,
    maxConcurrent: 1,
    maxIterations: 15,
    toolResultMaxChars: 10_000,
    log: pino({ level: "silent" }),
    budget: new ContextBudget({
      model: "gpt-4o-mini",
      windowTokens: 16_000,
      budgetTokens: 7800,
      consolidationTokens: 8000,
    }),
  });
  cleanup.push(() => manager.shutdown(2000));

  manager.spawn({ task: "Read part-0.txt to part-11.txt", origin: { channel: "cli", chatId: "1" } });
  await waitFor(() => inbound.length === 1, undefined, "the subagent's report");
  expect(inbound[0]!.content).toContain("read 12 parts");
  expect(fake.overflows).toEqual([]);
  const last = fake.lastRequest!.body.messages;
  const results = last.filter((m) => m.role === "tool").map((m) => String(m.content));
  expect(results).toHaveLength(12);
  expect(results[0]).toMatch(
    /^\[content cleared to save context: read_file\("part-0.txt"\) returned 4000 characters/,
  );
  expect(results.slice(-6).every((r) => r.length === 4000)).toBe(true);
}, 60_000);
