/**
 * Throughput end to end: the real `palaver gateway` (compiled dist/main.js,
 * as a service runs it) polling the fake Telegram, with 100 chats writing at
 * once and a fake LLM that takes 300 ms per answer (in its own process, so it
 * does not share an event loop with the gateway or the fake Telegram).
 *
 * With maxConcurrentTurns = 100 (BENCH_MAX_CONCURRENT_TURNS changes it) the
 * LLM latency allows at most 100 / 0.3 s ≈ 333 messages/s: the ideal rate.
 * 300 updates (3 per chat, so each chat's turns run one after the other) are
 * queued at once; the clock runs until the 300th reply has been sent with
 * sendMessage. A first round of one message per chat opens the connections;
 * then WARMUP_ROUNDS full rounds let the JIT settle: a daemon runs for months,
 * and its first rounds cost up to twice what every later one does (the first
 * full round's CPU is reported beside the result).
 * Per round: the share of the ideal rate and the gateway's CPU time per message
 * (utime + stime from /proc/<pid>/stat). The targets, medians of 5 rounds, are
 * regression guards with room for a busy machine, not goals: a change is judged
 * by running the build before it beside it (BENCH_DIST_MAIN) and comparing. Every
 * chat must get exactly its replies: none lost, none twice (checked after a
 * graceful stop).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { FakeTelegram } from "../tests/fakes/telegram-server.js";
import { writeGatewayConfig } from "../tests/helpers/gateway-process.js";
import { ensureBuilt } from "../tests/helpers/dist.js";
import { cpuMs, spawnGateway, type Entry } from "./gateway-child.js";
import { startFakeLlmProcess } from "./helpers.js";
import { median, meets } from "./measure.js";
import type { BenchResult, Measure } from "./types.js";

const CHATS = 100;
const PER_CHAT = 3;
const LATENCY_MS = 300;
const MAX_CONCURRENT_TURNS = Number(process.env.BENCH_MAX_CONCURRENT_TURNS ?? 100);
const IDEAL_PER_S = Math.min(MAX_CONCURRENT_TURNS, CHATS) / (LATENCY_MS / 1000);
const TARGET_SHARE = 55;
const TARGET_CPU_MS = 4;
const WARMUP_ROUNDS = 5;
const ROUNDS = 5;
const ROUND_TIMEOUT_MS = 20_000;
export const TARGET =
  `${CHATS} chats × ${PER_CHAT} messages through Telegram, ${LATENCY_MS} ms LLM, maxConcurrentTurns ${MAX_CONCURRENT_TURNS}: ` +
  `≥ ${TARGET_SHARE} % of the ideal ${IDEAL_PER_S.toFixed(0)} msg/s, ≤ ${TARGET_CPU_MS} ms CPU per message, no reply lost or repeated`;

const REPLY = "hi"; // what bench/fake-llm-server.ts answers

function chatId(i: number): number {
  return 1001 + i;
}

/**
 * The number of replies sent so far. Counted on from where the last count stopped: the fake
 * checks it on every request it serves, and scanning all of tg.sent each time (thousands of
 * messages by the last round) slowed the fake, which shares this process's event loop.
 */
function replyCounter(tg: FakeTelegram): () => number {
  let seen = 0;
  let count = 0;
  return () => {
    for (; seen < tg.sent.length; seen++) {
      const s = tg.sent[seen]!;
      if (s.method === "sendMessage" && s.text === REPLY) count++;
    }
    return count;
  };
}

/** Queues `perChat` messages from each chat at once; resolves with the ms until all were answered. */
async function round(
  tg: FakeTelegram,
  replies: () => number,
  name: string,
  perChat: number,
): Promise<number> {
  const expected = replies() + CHATS * perChat;
  const started = performance.now();
  for (let m = 0; m < perChat; m++) {
    for (let i = 0; i < CHATS; i++) {
      tg.userMessage({ text: `${name} ${m}`, from: { id: chatId(i), first_name: `user${i}` } });
    }
  }
  await tg.waitFor(() => replies() >= expected, ROUND_TIMEOUT_MS, `${expected} replies`);
  return performance.now() - started;
}

export async function benchThroughput(): Promise<BenchResult> {
  const buildProblem = ensureBuilt();
  const entry: Entry = buildProblem ? "tsx" : "dist";
  const dir = await mkdtemp(join(tmpdir(), "palaver-bench-throughput-"));
  const llm = await startFakeLlmProcess(LATENCY_MS);
  const tg = await FakeTelegram.start();
  const configPath = await writeGatewayConfig(
    dir,
    { llmBaseURL: llm.baseURL, telegram: tg },
    { agents: { defaults: { maxConcurrentTurns: MAX_CONCURRENT_TURNS } }, cron: { enabled: false } },
  );
  const gateway = spawnGateway(entry, configPath, dir);
  let stopped = false;
  try {
    await gateway.healthUrl(15_000);
    await tg.waitForCall(
      "getUpdates",
      (c) => typeof c.params.timeout === "number" && c.params.timeout > 0,
      15_000,
    );
    const replies = replyCounter(tg);
    await round(tg, replies, "connect", 1);
    const pid = gateway.child.pid!;
    const total = CHATS * PER_CHAT;
    const shares: number[] = [];
    const cpuPerMessage: number[] = [];
    const times: number[] = [];
    let firstRoundCpu: number | undefined;
    for (let r = 0; r < WARMUP_ROUNDS + ROUNDS; r++) {
      const cpuBefore = cpuMs(pid);
      const ms = await round(tg, replies, `round${r}`, PER_CHAT);
      const cpuAfter = cpuMs(pid);
      const cpu =
        cpuBefore !== undefined && cpuAfter !== undefined ? (cpuAfter - cpuBefore) / total : undefined;
      if (r === 0) firstRoundCpu = cpu;
      if (r < WARMUP_ROUNDS) continue;
      times.push(ms);
      shares.push((total / (ms / 1000) / IDEAL_PER_S) * 100);
      if (cpu !== undefined) cpuPerMessage.push(cpu);
    }
    // Lost or repeated replies: counted once the gateway has stopped (nothing more can arrive).
    const code = await gateway.stop(15_000);
    stopped = true;
    if (code !== 0) console.error(`gateway exited with ${code}:\n${gateway.stderr.slice(-2000)}`);
    const perChat = new Map<unknown, number>();
    for (const s of tg.sent) if (s.text === REPLY) perChat.set(s.chatId, (perChat.get(s.chatId) ?? 0) + 1);
    const expectedPerChat = 1 + (WARMUP_ROUNDS + ROUNDS) * PER_CHAT;
    const wrong = [...Array(CHATS).keys()].filter((i) => perChat.get(chatId(i)) !== expectedPerChat);
    const extra = tg.sent.filter((s) => s.text !== REPLY).length;

    const measures: Measure[] = [
      { name: "share of the ideal rate", unit: "%", rounds: shares, target: TARGET_SHARE, atLeast: true },
    ];
    if (cpuPerMessage.length)
      measures.push({
        name: "gateway CPU per message",
        unit: "ms",
        rounds: cpuPerMessage,
        target: TARGET_CPU_MS,
      });
    const elapsedMs = median(times);
    return {
      name: "throughput",
      target: TARGET,
      value:
        `${total} messages in ${elapsedMs.toFixed(0)} ms, median of ${ROUNDS} rounds ` +
        `(${times.map((t) => t.toFixed(0)).join(", ")}; ideal ${((total / IDEAL_PER_S) * 1000).toFixed(0)} ms)` +
        (cpuPerMessage.length ? `, ${median(cpuPerMessage).toFixed(2)} ms CPU per message` : "") +
        (firstRoundCpu !== undefined
          ? ` (${firstRoundCpu.toFixed(2)} in the first full round after start, before ${WARMUP_ROUNDS} rounds of warm-up)`
          : "") +
        (wrong.length
          ? `; ${wrong.length} chats did not get exactly ${expectedPerChat} replies`
          : `; every chat got exactly its ${expectedPerChat} replies`) +
        (entry === "tsx" ? `; from src via tsx (${buildProblem})` : "") +
        (extra ? `; ${extra} unexpected other messages sent` : ""),
      pass: measures.every(meets) && wrong.length === 0 && extra === 0,
      measures,
    };
  } catch (err) {
    console.error(`gateway log (tail):\n${gateway.stderr.slice(-3000)}`);
    throw err;
  } finally {
    if (!stopped) await gateway.stop(15_000);
    await tg.close();
    await llm.close();
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const { formatMeasure } = await import("./measure.js");
  const result = await benchThroughput();
  console.log(result.value);
  for (const m of result.measures ?? []) console.log(formatMeasure(m));
}
