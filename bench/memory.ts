/**
 * Memory search on the corpus (issue 37): 2,000 sessions of 50 messages (100,000
 * messages) with 100 planted facts. Measures the first full build, recall@5 of the 100 questions
 * with BM25 alone, search latency (p50, p95), the main-thread cost of indexing one appended turn,
 * and the index size on disk. Targets: recall@5 ≥ 0.95, search p95 ≤ 50 ms, ≤ 0.2 ms per message.
 *
 * Then the footprint: two real gateways (dist/) started side by side, one whose workspace holds the
 * corpus with its index built (the index open, 100,000 messages), one with an empty workspace (an
 * index with nothing in it: there is no switch to turn memory search off), and their idle RSS
 * compared. Target: at most 15 MB more.
 */
import { mkdtemp, mkdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { memoryIndexPath } from "../src/config/paths.js";
import { MemoryRecall } from "../src/recall/service.js";
import { FakeOpenAI } from "../tests/fakes/openai-server.js";
import { ensureBuilt } from "../tests/helpers/dist.js";
import { writeGatewayConfig } from "../tests/helpers/gateway-process.js";
import { writeCorpus } from "../tests/helpers/recall-corpus.js";
import { residentBytes, spawnGateway, type Entry } from "./gateway-child.js";
import { median } from "./measure.js";
import type { BenchResult } from "./types.js";

const TARGET =
  "recall@5 ≥ 0.95, search p95 ≤ 50 ms, indexing ≤ 0.2 ms per appended message (median), " +
  "gateway idle RSS with the index open ≤ +15 MB";
const RSS_TARGET_MB = 15;
/** Seconds of idle sampled per gateway (one sample a second); the last IDLE_TAIL count. */
const IDLE_S = 15;
const IDLE_TAIL = 5;
const READY_TIMEOUT_MS = 60_000;

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

export async function benchMemory(): Promise<BenchResult> {
  const dir = await mkdtemp(join(tmpdir(), "palaver-bench-memory-"));
  try {
    // Laid out as a gateway's state folder and workspace (gatewayConfig: workspace <dir>/ws), so the
    // footprint part below starts a gateway on this very index.
    const withIndex = join(dir, "with-index");
    const sessionsDir = join(withIndex, "ws", "sessions");
    await mkdir(sessionsDir, { recursive: true });
    const facts = await writeCorpus(sessionsDir, { sessions: 2000, messages: 50, facts: 100 });
    const made = MemoryRecall.create({
      indexPath: memoryIndexPath(withIndex),
      sessionsDir,
      archiveDir: join(sessionsDir, "archive"),
      memoryFile: join(dir, "MEMORY.md"),
      historyFile: join(dir, "HISTORY.md"),
      includeToolResults: false,
      log: pino({ level: "silent" }),
    });
    if ("missing" in made) return { name: "memory", target: TARGET, value: made.missing, pass: false };
    const recall = made;
    const buildStart = performance.now();
    await recall.start();
    const buildMs = performance.now() - buildStart;

    let found = 0;
    const latencies: number[] = [];
    for (const f of facts) {
      const t = performance.now();
      const hits = await recall.search({ query: f.question, limit: 5 });
      latencies.push(performance.now() - t);
      if (hits.some((h) => h.text === f.fact)) found++;
    }

    // One turn (user + assistant) handed over and indexed, as SessionStore.append does it.
    const perMessage: number[] = [];
    for (let i = 0; i < 200; i++) {
      const t = performance.now();
      recall.enqueue("bench:1", [
        { role: "user", content: `question ${i} about the garden and the dentist` },
        { role: "assistant", content: `answer ${i}: the plumber comes on Friday` },
      ]);
      await recall.search({ query: "zzzznothing", limit: 1 }); // flushes the queue
      perMessage.push((performance.now() - t) / 2);
    }
    const status = await recall.status();
    await recall.close();

    const rss = await idleRssSideBySide(withIndex, join(dir, "without-index"));

    const recallAt5 = found / facts.length;
    const p50 = quantile(latencies, 0.5);
    const p95 = quantile(latencies, 0.95);
    const append = quantile(perMessage, 0.5);
    return {
      name: "memory",
      target: TARGET,
      value:
        `recall@5 ${recallAt5.toFixed(2)}; search p50 ${p50.toFixed(1)} ms, p95 ${p95.toFixed(1)} ms; ` +
        `indexing ${append.toFixed(3)} ms per message (with a search's flush); first build ` +
        `${(buildMs / 1000).toFixed(1)} s; index ${(status.bytesOnDisk / 1e6).toFixed(1)} MB; ` +
        (rss
          ? `gateway idle RSS ${rss.withMb.toFixed(1)} MB with the index open, ${rss.withoutMb.toFixed(1)} MB ` +
            `with an empty one (${formatDelta(rss.withMb - rss.withoutMb)} MB)`
          : "gateway idle RSS not measurable here (no /proc)"),
      pass: recallAt5 >= 0.95 && p95 <= 50 && (!rss || rss.withMb - rss.withoutMb <= RSS_TARGET_MB),
      measures: [
        ...(rss
          ? [
              {
                name: "gateway idle RSS, index open minus empty index",
                unit: "MB",
                rounds: [rss.withMb - rss.withoutMb],
                target: RSS_TARGET_MB,
              },
            ]
          : []),
        { name: "search latency p95", unit: "ms", rounds: [p95], target: 50 },
        { name: "recall@5", unit: "", rounds: [recallAt5], target: 0.95, atLeast: true },
      ],
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function formatDelta(mb: number): string {
  return `${mb >= 0 ? "+" : ""}${mb.toFixed(1)}`;
}

/**
 * Two gateways at once, one on `withIndex` (its index already built) and one on an empty
 * workspace; the median of each one's last idle samples. Undefined without /proc.
 */
async function idleRssSideBySide(
  withIndex: string,
  withoutIndex: string,
): Promise<{ withMb: number; withoutMb: number } | undefined> {
  const entry: Entry = ensureBuilt() ? "tsx" : "dist";
  const llm = await FakeOpenAI.start();
  await mkdir(join(withoutIndex, "ws"), { recursive: true });
  const gateways = await Promise.all(
    [withIndex, withoutIndex].map(async (d) =>
      spawnGateway(entry, await writeGatewayConfig(d, { llmBaseURL: llm.baseURL }), d),
    ),
  );
  try {
    await Promise.all(gateways.map((g) => g.healthUrl(READY_TIMEOUT_MS)));
    const samples: number[][] = [[], []];
    for (let s = 0; s < IDLE_S; s++) {
      await new Promise((r) => setTimeout(r, 1000));
      for (const [i, g] of gateways.entries()) {
        const bytes = residentBytes(g.child.pid!);
        if (bytes === undefined) return undefined;
        samples[i]!.push(bytes / 2 ** 20);
      }
    }
    const [withMb, withoutMb] = samples.map((s) => median(s.slice(-IDLE_TAIL)));
    return { withMb: withMb!, withoutMb: withoutMb! };
  } finally {
    await Promise.all(gateways.map((g) => g.stop()));
    await llm.close();
  }
}
