/**
 * Cluster mode's scaling and its cost (issue 36), `npm run bench -- cluster`:
 *
 * - Throughput: the same load (CHATS chats × PER_CHAT messages through Telegram, queued at once, an
 *   LLM taking 500 ms in its own process, the default maxConcurrentTurns) on a cluster of 1 and of
 *   3 gateway processes sharing one PostgreSQL, rounds alternating between the two. Three instances
 *   have three times the turn slots; the target is ≥ 2.5× the messages per second of one.
 * - Latency: one message at a time (so nothing queues), the time from the update to the reply on an
 *   embedded gateway (no cluster) and on the 1-instance cluster, rounds alternating; the cluster's
 *   added latency is the difference of the medians (aim ≤ 50 ms: pg-boss wakes a worker by
 *   LISTEN/NOTIFY when a job arrives).
 *
 * Needs PostgreSQL's binaries (Debian's postgresql package), as the cluster tests do.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { FakeTelegram } from "../tests/fakes/telegram-server.js";
import { ensureBuilt } from "../tests/helpers/dist.js";
import { gatewayConfig } from "../tests/helpers/gateway-process.js";
import { postgresMissing, startPostgres, type TestPostgres } from "../tests/helpers/postgres.js";
import { spawnGateway, type Entry, type GatewayChild } from "./gateway-child.js";
import { startFakeLlmProcess } from "./helpers.js";
import { median, meets } from "./measure.js";
import type { BenchResult, Measure } from "./types.js";

const CHATS = 60;
const PER_CHAT = 3;
const LATENCY_MS = 500;
const ROUNDS = 3;
const LATENCY_SAMPLES = 15;
const TARGET_SCALE = 2.5;
const TARGET_ADDED_MS = 50;
const REPLY = "hi"; // what bench/fake-llm-server.ts answers
export const TARGET =
  `${CHATS} chats × ${PER_CHAT} messages, ${LATENCY_MS} ms LLM, default maxConcurrentTurns: 3 instances ≥ ` +
  `${TARGET_SCALE}× the throughput of 1; a turn's added latency in cluster mode ≤ ${TARGET_ADDED_MS} ms (median)`;

/** A set of gateway children on one config each and one fake Telegram; stopped together. */
interface Deployment {
  tg: FakeTelegram;
  gateways: GatewayChild[];
  replies(): number;
}

async function deploy(
  entry: Entry,
  dir: string,
  llmBaseURL: string,
  instances: number,
  database: string | undefined,
): Promise<Deployment> {
  const tg = await FakeTelegram.start();
  const gateways: GatewayChild[] = [];
  for (let i = 0; i < instances; i++) {
    const own = join(dir, `i${i}`);
    await mkdir(own, { recursive: true });
    const config = gatewayConfig(
      dir,
      { llmBaseURL, telegram: tg },
      { cron: { enabled: false }, ...(database ? { cluster: { database } } : {}) },
    );
    const path = join(own, "config.json");
    await writeFile(path, JSON.stringify(config));
    gateways.push(spawnGateway(entry, path, own));
  }
  await Promise.all(gateways.map((g) => g.healthUrl(60_000)));
  await tg.waitForCall(
    "getUpdates",
    (c) => typeof c.params.timeout === "number" && c.params.timeout > 0,
    60_000,
  );
  let seen = 0;
  let count = 0;
  const replies = () => {
    for (; seen < tg.sent.length; seen++) if (tg.sent[seen]!.text === REPLY) count++;
    return count;
  };
  return { tg, gateways, replies };
}

async function undeploy(d: Deployment): Promise<void> {
  await Promise.all(d.gateways.map((g) => g.stop(15_000)));
  await d.tg.close();
}

/** Every chat's messages at once; the messages per second until the last reply. */
async function loadRound(d: Deployment, round: number): Promise<number> {
  const expected = d.replies() + CHATS * PER_CHAT;
  const started = performance.now();
  for (let m = 0; m < PER_CHAT; m++)
    for (let i = 0; i < CHATS; i++)
      d.tg.userMessage({ text: `r${round} ${m}`, from: { id: 2000 + i, first_name: `u${i}` } });
  await d.tg.waitFor(() => d.replies() >= expected, 120_000, `${expected} replies`);
  return (CHATS * PER_CHAT) / ((performance.now() - started) / 1000);
}

/** One message, nothing else running: ms from the update to its reply. */
async function oneMessage(d: Deployment, n: number): Promise<number> {
  const expected = d.replies() + 1;
  const started = performance.now();
  d.tg.userMessage({ text: `latency ${n}`, from: { id: 9000, first_name: "solo" } });
  await d.tg.waitFor(() => d.replies() >= expected, 30_000, "the reply");
  return performance.now() - started;
}

export async function benchCluster(): Promise<BenchResult> {
  const missing = postgresMissing();
  if (missing) return { name: "cluster", target: TARGET, value: `not run: ${missing}`, pass: false };
  const buildProblem = ensureBuilt();
  const entry: Entry = buildProblem ? "tsx" : "dist";
  const llm = await startFakeLlmProcess(LATENCY_MS);
  let server: TestPostgres | undefined;
  const dirs: string[] = [];
  const fresh = async (name: string) => {
    const dir = await mkdtemp(join(tmpdir(), `palaver-bench-cluster-${name}-`));
    dirs.push(dir);
    return dir;
  };
  try {
    server = await startPostgres();
    const one = await deploy(entry, await fresh("one"), llm.baseURL, 1, await server.createDatabase());
    const three = await deploy(entry, await fresh("three"), llm.baseURL, 3, await server.createDatabase());
    const embedded = await deploy(entry, await fresh("embedded"), llm.baseURL, 1, undefined);
    try {
      // Warm-up: connections opened, the JIT settled a little.
      for (const d of [one, three, embedded]) await loadRound(d, -1);
      const rateOne: number[] = [];
      const rateThree: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        rateOne.push(await loadRound(one, r));
        rateThree.push(await loadRound(three, r));
      }
      const plain: number[] = [];
      const clustered: number[] = [];
      for (let n = 0; n < LATENCY_SAMPLES; n++) {
        plain.push(await oneMessage(embedded, n));
        clustered.push(await oneMessage(one, n));
      }
      const scale = rateThree.map((rate, i) => rate / rateOne[i]!);
      const added = median(clustered) - median(plain);
      const measures: Measure[] = [
        {
          name: "3 instances' throughput over 1's",
          unit: "×",
          rounds: scale,
          target: TARGET_SCALE,
          atLeast: true,
        },
        {
          name: "a turn's latency, cluster (1 instance) minus embedded",
          unit: "ms",
          rounds: [added],
          target: TARGET_ADDED_MS,
        },
      ];
      return {
        name: "cluster",
        target: TARGET,
        value:
          `1 instance ${median(rateOne).toFixed(1)} msg/s, 3 instances ${median(rateThree).toFixed(1)} msg/s ` +
          `(${median(scale).toFixed(2)}×, rounds alternating); one message: embedded ${median(plain).toFixed(0)} ms, ` +
          `cluster ${median(clustered).toFixed(0)} ms (medians of ${LATENCY_SAMPLES}, LLM ${LATENCY_MS} ms)` +
          (entry === "tsx" ? `; from src via tsx (${buildProblem})` : ""),
        pass: measures.every(meets),
        measures,
      };
    } finally {
      await Promise.all([one, three, embedded].map(undeploy));
    }
  } finally {
    await llm.close();
    await server?.stop();
    await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const { formatMeasure } = await import("./measure.js");
  const result = await benchCluster();
  console.log(result.value);
  for (const m of result.measures ?? []) console.log(formatMeasure(m));
}
