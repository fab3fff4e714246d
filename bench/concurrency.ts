/**
 * Concurrency: 50 chats at once against a fake LLM with 200 ms latency and
 * maxConcurrentTurns 50, through the real LLM client. Target: all answered in
 * ≤ 1.5 × one latency (300 ms), i.e. chats really run side by side.
 * The fake LLM runs in its own process (a real LLM is not on our event loop);
 * one full round warms up sockets and the JIT, then the median of 3 rounds counts.
 */
import { fileURLToPath, pathToFileURL } from "node:url";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import type { Provider } from "../src/llm/types.js";
import { createProvider } from "../src/llm/openai-provider.js";
import { ConfigSchema } from "../src/config/schema.js";
import { percentile, startHarness } from "./helpers.js";
import type { BenchResult } from "./types.js";

const CHATS = 50;
const LATENCY_MS = 200;
const ROUNDS = 3;
export const TARGET = `${CHATS} chats, ${LATENCY_MS} ms LLM latency: all answered ≤ ${1.5 * LATENCY_MS} ms`;

async function startFakeLlm(): Promise<{ baseURL: string; close(): Promise<void> }> {
  const script = fileURLToPath(new URL("./fake-llm-server.ts", import.meta.url));
  const child = spawn(process.execPath, ["--import", "tsx", script, String(LATENCY_MS)], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const [line] = (await once(createInterface({ input: child.stdout }), "line")) as [string];
  return {
    baseURL: line,
    async close() {
      child.stdin.end();
      if (child.exitCode === null) await once(child, "exit");
    },
  };
}

function providerFor(baseURL: string): Provider {
  return createProvider(
    ConfigSchema.parse({
      // The same maxConcurrentTurns as the agent's: it sizes the provider's connection pool too.
      agents: { defaults: { provider: "custom", model: "fake-model", maxConcurrentTurns: CHATS } },
      providers: { custom: { apiKey: "bench", apiBase: baseURL } },
    }),
  );
}

export async function benchConcurrency(): Promise<BenchResult> {
  const llm = await startFakeLlm();
  const agent = await startHarness({
    provider: providerFor(llm.baseURL),
    config: { agents: { defaults: { maxConcurrentTurns: CHATS } } },
  });
  const round = async (name: string) => {
    const started = performance.now();
    await Promise.all(Array.from({ length: CHATS }, (_, i) => agent.ask(`${name}-${i}`, "hello")));
    return performance.now() - started;
  };
  try {
    await round("warmup");
    const times: number[] = [];
    for (let r = 0; r < ROUNDS; r++) times.push(await round(`round${r}`));
    const median = percentile(times, 50);
    return {
      name: "concurrency",
      target: TARGET,
      value: `median ${median.toFixed(0)} ms (${(median / LATENCY_MS).toFixed(2)} × latency) over ${ROUNDS} rounds`,
      pass: median <= 1.5 * LATENCY_MS,
    };
  } finally {
    await agent.cleanup();
    await llm.close();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  console.log(await benchConcurrency());
}
