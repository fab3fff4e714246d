/**
 * `npm run bench`: runs every benchmark and prints each result beside its target, then each of its
 * measures as median of the rounds, spread, target and ratio (bench/measure.ts).
 * `npm run bench -- startup web` runs only the benchmarks whose names contain one of the words.
 */
import { benchBotCalls } from "./bot-calls.js";
import { benchCluster } from "./cluster.js";
import { benchConcurrency } from "./concurrency.js";
import { benchContextBudget } from "./context-budget.js";
import { benchHtml } from "./html.js";
import { benchJournal } from "./journal.js";
import { formatMeasure } from "./measure.js";
import { benchMemory } from "./memory.js";
import { benchOverhead } from "./overhead.js";
import { benchSessionAppend } from "./session-append.js";
import { benchSessionLoad } from "./session-load.js";
import { benchSoak } from "./soak.js";
import { benchStartup } from "./startup.js";
import { benchStreaming } from "./streaming.js";
import { benchThroughput } from "./throughput.js";
import { benchTools } from "./tools.js";
import type { BenchResult } from "./types.js";
import { benchWeb } from "./web.js";

const benches: (() => Promise<BenchResult>)[] = [
  benchSessionAppend,
  benchSessionLoad,
  benchConcurrency,
  benchOverhead,
  benchJournal,
  benchHtml,
  benchStartup,
  benchThroughput,
  benchBotCalls,
  benchStreaming,
  benchContextBudget,
  benchWeb,
  benchMemory,
  benchTools,
];
/**
 * Only when asked for by name: the soak runs for many minutes (`npm run bench -- soak`), the cluster
 * needs PostgreSQL (`npm run bench -- cluster`).
 */
const onRequest: (() => Promise<BenchResult>)[] = [benchSoak, benchCluster];

const words = process.argv.slice(2).map((w) => w.toLowerCase());
const chosen = [...benches, ...onRequest].filter((bench) =>
  words.length === 0 ? benches.includes(bench) : words.some((w) => bench.name.toLowerCase().includes(w)),
);
if (chosen.length === 0) {
  console.error(
    `no benchmark matches ${words.join(", ")}: they are ${[...benches, ...onRequest].map((b) => b.name).join(", ")}`,
  );
  process.exit(2);
}

let failed = 0;
for (const bench of chosen) {
  const result = await bench();
  if (!result.pass) failed++;
  console.log(
    `${result.pass ? "PASS" : "FAIL"}  ${result.name}: ${result.value}\n      target: ${result.target}`,
  );
  for (const m of result.measures ?? []) console.log(`      ${formatMeasure(m)}`);
}
process.exitCode = failed ? 1 : 0;
