/**
 * Overhead: time per message spent outside the LLM call (context build,
 * persistence, bus), with a 1,000-message session. The LLM answers
 * instantly in-process, so what is measured is palaver's own work.
 * Target: p50 ≤ 2 ms.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { ChatResponse, Provider } from "../src/llm/types.js";
import { percentile, startHarness } from "./helpers.js";
import type { BenchResult } from "./types.js";

const SESSION_MESSAGES = 1000;
const RUNS = 300;
export const TARGET = `per-message overhead outside the LLM, ${SESSION_MESSAGES}-message session: p50 ≤ 2 ms`;

class InstantProvider implements Provider {
  readonly model = "instant";
  llmMs = 0;
  chat(): Promise<ChatResponse> {
    const started = performance.now();
    const response: ChatResponse = { content: "ok", toolCalls: [], finishReason: "stop" };
    this.llmMs += performance.now() - started;
    return Promise.resolve(response);
  }
}

async function writeSession(workspace: string, key: string): Promise<void> {
  const now = new Date().toISOString();
  const lines = [
    JSON.stringify({
      _type: "metadata",
      key,
      created_at: now,
      updated_at: now,
      metadata: {},
      last_consolidated: 0,
    }),
  ];
  for (let i = 0; i < SESSION_MESSAGES; i++) {
    const role = i % 2 === 0 ? "user" : "assistant";
    lines.push(JSON.stringify({ role, content: `message ${i} `.repeat(20), timestamp: now }));
  }
  await mkdir(join(workspace, "sessions"), { recursive: true });
  await writeFile(join(workspace, "sessions", `${key.replace(/:/g, "_")}.jsonl`), `${lines.join("\n")}\n`);
}

export async function benchOverhead(): Promise<BenchResult> {
  const provider = new InstantProvider();
  const agent = await startHarness({ provider });
  try {
    await writeSession(agent.workspace, "test:big");
    await agent.ask("big", "warm up"); // loads the session and caches the system prompt
    const samples: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      provider.llmMs = 0;
      const started = performance.now();
      await agent.ask("big", `question ${i}`);
      samples.push(performance.now() - started - provider.llmMs);
    }
    const p50 = percentile(samples, 50);
    return {
      name: "overhead",
      target: TARGET,
      value: `p50 ${p50.toFixed(2)} ms, p95 ${percentile(samples, 95).toFixed(2)} ms`,
      pass: p50 <= 2,
    };
  } finally {
    await agent.cleanup();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  console.log(await benchOverhead());
}
