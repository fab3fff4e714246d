/**
 * Startup: `palaver gateway` from spawn to GET /readyz answering 200 (every
 * channel connected), with Telegram, Slack (Socket Mode) and Discord enabled
 * against their loopback fakes, and its resident memory (VmRSS) while idle.
 * Targets: ready ≤ 1.5 s, idle RSS ≤ 120 MB — for the compiled dist/main.js,
 * which is what a service runs (built first when src/ is newer). Starting
 * from the sources through tsx is measured too, for information.
 *
 * Each start uses a fresh state folder and workspace (the first start ever:
 * templates are copied). Ready time: the median of the runs. Memory: the
 * first run is left idle for IDLE_MS and sampled every second; "idle RSS"
 * is the median of the last samples, after V8's memory reducer has given
 * back the young generation that startup grew (it does so after ~15-20 s of
 * quiet); the RSS 1 s after ready is reported beside it.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { FakeDiscord } from "../tests/fakes/discord-server.js";
import { FakeOpenAI } from "../tests/fakes/openai-server.js";
import { FakeSlack } from "../tests/fakes/slack-server.js";
import { FakeTelegram } from "../tests/fakes/telegram-server.js";
import { writeGatewayConfig, type GatewayFakes } from "../tests/helpers/gateway-process.js";
import { ensureBuilt, residentBytes, spawnGateway, type Entry } from "./gateway-child.js";
import { percentile } from "./helpers.js";
import type { BenchResult } from "./types.js";

const RUNS = 3;
const TSX_RUNS = 1;
const READY_TARGET_MS = 1500;
const RSS_TARGET_MB = 120;
const IDLE_MS = 25_000;
const IDLE_TAIL_SAMPLES = 5;
const READY_TIMEOUT_MS = 15_000;
export const TARGET = `cold start to /readyz 200 (Telegram, Slack, Discord) ≤ ${READY_TARGET_MS} ms; idle RSS ≤ ${RSS_TARGET_MB} MB`;

interface Run {
  readyMs: number;
  /** VmRSS in MB, one sample a second from 1 s after ready. */
  rssMb: number[];
}

const mb = (bytes: number) => bytes / 2 ** 20;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function readyz(url: string): Promise<number> {
  try {
    const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(1000) });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

async function startOnce(entry: Entry, fakes: GatewayFakes, idleMs: number): Promise<Run> {
  const dir = await mkdtemp(join(tmpdir(), "palaver-bench-startup-"));
  const configPath = await writeGatewayConfig(dir, fakes, { cron: { enabled: false } });
  const started = performance.now();
  const gateway = spawnGateway(entry, configPath, dir);
  try {
    const url = await gateway.healthUrl(READY_TIMEOUT_MS);
    const deadline = Date.now() + READY_TIMEOUT_MS;
    while ((await readyz(url)) !== 200) {
      if (Date.now() > deadline)
        throw new Error(`not ready within ${READY_TIMEOUT_MS} ms:\n${gateway.stderr}`);
      await sleep(5);
    }
    const readyMs = performance.now() - started;
    const rssMb: number[] = [];
    for (let waited = 0; waited < idleMs; waited += 1000) {
      await sleep(1000);
      const rss = residentBytes(gateway.child.pid!);
      if (rss === undefined) break; // no /proc here
      rssMb.push(mb(rss));
    }
    return { readyMs, rssMb };
  } finally {
    const code = await gateway.stop();
    if (code !== 0) console.error(`gateway exited with ${code}:\n${gateway.stderr.slice(-2000)}`);
    await rm(dir, { recursive: true, force: true });
  }
}

export async function benchStartup(): Promise<BenchResult> {
  const buildProblem = ensureBuilt();
  const entry: Entry = buildProblem ? "tsx" : "dist";
  const llm = await FakeOpenAI.start();
  const telegram = await FakeTelegram.start();
  const slack = await FakeSlack.start();
  const discord = await FakeDiscord.start();
  discord.addGuild({ name: "home", channels: ["general"] });
  const fakes: GatewayFakes = { llmBaseURL: llm.baseURL, telegram, slack, discord };
  try {
    const runs: Run[] = [];
    for (let i = 0; i < RUNS; i++) runs.push(await startOnce(entry, fakes, i === 0 ? IDLE_MS : 0));
    const tsxRuns: Run[] = [];
    if (entry === "dist") for (let i = 0; i < TSX_RUNS; i++) tsxRuns.push(await startOnce("tsx", fakes, 0));

    const readyMs = runs.map((r) => r.readyMs);
    const ready = percentile(readyMs, 50);
    const samples = runs[0]!.rssMb;
    const idle = samples.length ? percentile(samples.slice(-IDLE_TAIL_SAMPLES), 50) : undefined;
    const parts = [
      `${entry === "dist" ? "node dist/main.js" : "tsx src/main.ts"}: ready median ${ready.toFixed(0)} ms ` +
        `(runs ${readyMs.map((v) => v.toFixed(0)).join(", ")})`,
      idle !== undefined
        ? `idle RSS ${idle.toFixed(1)} MB after ${IDLE_MS / 1000} s idle ` +
          `(${samples[0]!.toFixed(1)} MB 1 s after ready, peak ${Math.max(...samples).toFixed(1)} MB)`
        : "idle RSS not measurable here (no /proc)",
    ];
    if (tsxRuns.length) {
      const tsxReady = percentile(
        tsxRuns.map((r) => r.readyMs),
        50,
      );
      parts.push(`from src via tsx: ready ${tsxReady.toFixed(0)} ms (information, not the target)`);
    }
    if (buildProblem) parts.push(`dist not used: ${buildProblem}`);
    return {
      name: "startup",
      target: TARGET,
      value: parts.join("; "),
      pass: ready <= READY_TARGET_MS && (idle === undefined || idle <= RSS_TARGET_MB),
    };
  } finally {
    await telegram.close();
    await slack.close();
    await discord.close();
    await llm.close();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  console.log(await benchStartup());
}
