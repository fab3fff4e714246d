/** Shared pieces of the benchmarks. */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import type { FakeReply } from "../tests/fakes/openai-server.js";

export { startHarness } from "../tests/helpers/agent-harness.js";

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

/**
 * The fake LLM (bench/fake-llm-server.ts) in its own process, answering "hi"
 * after `latencyMs` (or `reply`, merged over that): a real LLM is not on the
 * event loop being measured.
 */
export function startFakeLlmProcess(latencyMs: number, reply?: FakeReply): Promise<LlmProcess> {
  return startLlmProcess("fake-llm-server.ts", [
    String(latencyMs),
    ...(reply ? [JSON.stringify(reply)] : []),
  ]);
}

export interface LlmProcess {
  baseURL: string;
  pid: number;
  close(): Promise<void>;
}

/** A fake LLM script of bench/ (its base URL on its first line of stdout) run in its own process. */
export async function startLlmProcess(script: string, args: string[]): Promise<LlmProcess> {
  const path = fileURLToPath(new URL(`./${script}`, import.meta.url));
  const child = spawn(process.execPath, ["--import", "tsx", path, ...args], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const [line] = (await once(createInterface({ input: child.stdout }), "line")) as [string];
  return {
    baseURL: line,
    pid: child.pid!,
    async close() {
      child.stdin.end();
      if (child.exitCode === null) await once(child, "exit");
    },
  };
}
