/**
 * Startup: `palaver gateway` (the compiled dist/main.js, what a service runs; built first when
 * src/ is newer) against loopback fakes, a fresh state folder and workspace each time (the first
 * start ever: templates are copied):
 * - spawn → GET /readyz 200 with Telegram, Slack (Socket Mode) and Discord enabled;
 * - spawn → the first long-polling getUpdates with Telegram only;
 * - idle RSS (VmRSS) after 30 s, Telegram only and all three: one start each,
 *   sampled every second; the last samples count, after V8's memory reducer has given back the
 *   young generation that startup grew (it does so after ~15-20 s of quiet).
 * Times are the median of several starts. Starting from the sources through tsx is measured
 * once, for information. The targets are regression guards with room for a busy machine, not
 * goals: a change is judged by running the build before it beside it (BENCH_DIST_MAIN).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { FakeDiscord } from "../tests/fakes/discord-server.js";
import { FakeOpenAI } from "../tests/fakes/openai-server.js";
import { FakeSlack } from "../tests/fakes/slack-server.js";
import { FakeTelegram } from "../tests/fakes/telegram-server.js";
import { isLongPoll, writeGatewayConfig, type GatewayFakes } from "../tests/helpers/gateway-process.js";
import { ensureBuilt } from "../tests/helpers/dist.js";
import { cpuMs, residentBytes, spawnGateway, type Entry } from "./gateway-child.js";
import { median, meets } from "./measure.js";
import type { BenchResult, Measure } from "./types.js";

const RUNS = 5;
const READY_TARGET_MS = 1500;
const FIRST_POLL_TARGET_MS = 600;
const RSS_TELEGRAM_TARGET_MB = 130;
const RSS_ALL_TARGET_MB = 200;
const IDLE_MS = 30_000;
const IDLE_TAIL_SAMPLES = 5;
const READY_TIMEOUT_MS = 15_000;
export const TARGET =
  `spawn → /readyz 200 (Telegram, Slack, Discord) ≤ ${READY_TARGET_MS} ms; ` +
  `spawn → first getUpdates (Telegram only) ≤ ${FIRST_POLL_TARGET_MS} ms; ` +
  `idle RSS after ${IDLE_MS / 1000} s ≤ ${RSS_TELEGRAM_TARGET_MB} MB (Telegram only) / ≤ ${RSS_ALL_TARGET_MB} MB (all three)`;

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

/** What counts as "started": /readyz 200, or (Telegram only) the first long poll. */
type Until = "ready" | "first-poll";

interface Run {
  ms: number;
  /** CPU time the gateway used until then (information: it hardly depends on the machine's load). */
  cpuMs: number | undefined;
  /** VmRSS in MB, one sample a second from 1 s after starting, for idleMs. */
  rssMb: number[];
}

async function startOnce(entry: Entry, fakes: GatewayFakes, until: Until, idleMs: number): Promise<Run> {
  const dir = await mkdtemp(join(tmpdir(), "palaver-bench-startup-"));
  const configPath = await writeGatewayConfig(dir, fakes, { cron: { enabled: false } });
  const polls = fakes.telegram?.callsTo("getUpdates").filter(isLongPoll).length ?? 0;
  const started = performance.now();
  const gateway = spawnGateway(entry, configPath, dir);
  try {
    if (until === "first-poll") {
      const tg = fakes.telegram!;
      await tg.waitFor(() => tg.callsTo("getUpdates").filter(isLongPoll).length > polls, READY_TIMEOUT_MS);
    } else {
      const url = await gateway.healthUrl(READY_TIMEOUT_MS);
      const deadline = Date.now() + READY_TIMEOUT_MS;
      while ((await readyz(url)) !== 200) {
        if (Date.now() > deadline)
          throw new Error(`not ready within ${READY_TIMEOUT_MS} ms:\n${gateway.stderr}`);
        await sleep(5);
      }
    }
    const ms = performance.now() - started;
    const cpu = cpuMs(gateway.child.pid!);
    const rssMb: number[] = [];
    for (let waited = 0; waited < idleMs; waited += 1000) {
      await sleep(1000);
      const rss = residentBytes(gateway.child.pid!);
      if (rss === undefined) break; // no /proc here
      rssMb.push(mb(rss));
    }
    return { ms, cpuMs: cpu, rssMb };
  } finally {
    const code = await gateway.stop();
    if (code !== 0) console.error(`gateway exited with ${code}:\n${gateway.stderr.slice(-2000)}`);
    await rm(dir, { recursive: true, force: true });
  }
}

/** The idle RSS of one start: its last samples as the rounds (empty without /proc). */
const idleTail = (run: Run) => run.rssMb.slice(-IDLE_TAIL_SAMPLES);

export async function benchStartup(): Promise<BenchResult> {
  const buildProblem = ensureBuilt();
  const entry: Entry = buildProblem ? "tsx" : "dist";
  const llm = await FakeOpenAI.start();
  const telegram = await FakeTelegram.start();
  const slack = await FakeSlack.start();
  const discord = await FakeDiscord.start();
  discord.addGuild({ name: "home", channels: ["general"] });
  const all: GatewayFakes = { llmBaseURL: llm.baseURL, telegram, slack, discord };
  const telegramOnly: GatewayFakes = { llmBaseURL: llm.baseURL, telegram };
  try {
    const ready: Run[] = [];
    const firstPoll: Run[] = [];
    // Interleaved, so a burst of load elsewhere on the machine hits both alike.
    for (let i = 0; i < RUNS; i++) {
      ready.push(await startOnce(entry, all, "ready", 0));
      firstPoll.push(await startOnce(entry, telegramOnly, "first-poll", 0));
    }
    const idleAll = idleTail(await startOnce(entry, all, "ready", IDLE_MS));
    const idleTelegram = idleTail(await startOnce(entry, telegramOnly, "first-poll", IDLE_MS));
    const tsx = entry === "dist" ? await startOnce("tsx", all, "ready", 0) : undefined;

    const measures: Measure[] = [
      {
        name: "spawn → /readyz 200, Telegram+Slack+Discord",
        unit: "ms",
        rounds: ready.map((r) => r.ms),
        target: READY_TARGET_MS,
      },
      {
        name: "spawn → first getUpdates, Telegram only",
        unit: "ms",
        rounds: firstPoll.map((r) => r.ms),
        target: FIRST_POLL_TARGET_MS,
      },
    ];
    if (idleTelegram.length)
      measures.push({
        name: `idle RSS after ${IDLE_MS / 1000} s, Telegram only (last ${IDLE_TAIL_SAMPLES} samples)`,
        unit: "MB",
        rounds: idleTelegram,
        target: RSS_TELEGRAM_TARGET_MB,
      });
    if (idleAll.length)
      measures.push({
        name: `idle RSS after ${IDLE_MS / 1000} s, all three (last ${IDLE_TAIL_SAMPLES} samples)`,
        unit: "MB",
        rounds: idleAll,
        target: RSS_ALL_TARGET_MB,
      });
    const cpu = (runs: Run[]) => {
      const values = runs.map((r) => r.cpuMs).filter((v): v is number => v !== undefined);
      return values.length ? `${median(values).toFixed(0)} ms CPU` : "CPU not measurable";
    };
    const parts = [
      `${entry === "dist" ? "node dist/main.js" : "tsx src/main.ts"}: ready ${median(measures[0]!.rounds).toFixed(0)} ms ` +
        `(${cpu(ready)}), first poll ${median(measures[1]!.rounds).toFixed(0)} ms (${cpu(firstPoll)})`,
      idleAll.length
        ? `idle RSS ${median(idleTelegram).toFixed(1)} MB Telegram only, ${median(idleAll).toFixed(1)} MB all three`
        : "idle RSS not measurable here (no /proc)",
    ];
    if (tsx) parts.push(`from src via tsx: ready ${tsx.ms.toFixed(0)} ms (information, not the target)`);
    if (buildProblem) parts.push(`dist not used: ${buildProblem}`);
    return {
      name: "startup",
      target: TARGET,
      value: parts.join("; "),
      pass: measures.every(meets),
      measures,
    };
  } finally {
    await telegram.close();
    await slack.close();
    await discord.close();
    await llm.close();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const { formatMeasure } = await import("./measure.js");
  const result = await benchStartup();
  console.log(result.value);
  for (const m of result.measures ?? []) console.log(formatMeasure(m));
}
