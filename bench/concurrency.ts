/**
 * Concurrency: 50 chats at once against a fake LLM with 200 ms latency and
 * maxConcurrentTurns 50. Target: all answered in ≤ 1.5 × one latency (300 ms),
 * i.e. chats really run side by side, through the real openai SDK.
 */
import { pathToFileURL } from "node:url";
import { startHarness } from "./helpers.js";
import type { BenchResult } from "./types.js";

const CHATS = 50;
const LATENCY_MS = 200;
export const TARGET = `${CHATS} chats, ${LATENCY_MS} ms LLM latency: all answered ≤ ${1.5 * LATENCY_MS} ms`;

export async function benchConcurrency(): Promise<BenchResult> {
  const agent = await startHarness({ config: { agents: { defaults: { maxConcurrentTurns: CHATS } } } });
  agent.fake!.setHandler(() => ({ content: "hi", delayMs: LATENCY_MS }));
  try {
    await agent.ask("warmup", "hello"); // first-call costs (sockets, JIT) are not what we measure
    const started = performance.now();
    await Promise.all(Array.from({ length: CHATS }, (_, i) => agent.ask(`chat-${i}`, "hello")));
    const elapsed = performance.now() - started;
    return {
      name: "concurrency",
      target: TARGET,
      value: `${elapsed.toFixed(0)} ms (${(elapsed / LATENCY_MS).toFixed(2)} × latency)`,
      pass: elapsed <= 1.5 * LATENCY_MS,
    };
  } finally {
    await agent.cleanup();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  console.log(await benchConcurrency());
}
