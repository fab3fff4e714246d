/**
 * Session load: the first turn of a chat with a long history reads its whole session file.
 * Times SessionStore.get on a 10,000-message session (a fresh store each round, so nothing is
 * cached in memory; the file itself is in the page cache, as it is for a session in use).
 * Target: ≤ 12 ms, median of the rounds.
 */
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { SessionStore } from "../src/sessions/store.js";
import { median } from "./measure.js";
import { writeBigSession } from "./session-append.js";
import type { BenchResult, Measure } from "./types.js";

const MESSAGES = 10_000;
const ROUNDS = 15;
const WARMUP = 5;
const TARGET_MS = 12;
export const TARGET = `first load of a ${MESSAGES.toLocaleString("en")}-message session ≤ ${TARGET_MS} ms`;

export async function benchSessionLoad(): Promise<BenchResult> {
  const dir = await mkdtemp(join(tmpdir(), "palaver-bench-load-"));
  try {
    const sessionsDir = join(dir, "sessions");
    await mkdir(sessionsDir);
    const key = "bench:long";
    await writeBigSession(new SessionStore(sessionsDir).pathFor(key), key, MESSAGES);
    const rounds: number[] = [];
    const collectGarbage = garbageCollector();
    for (let i = 0; i < WARMUP + ROUNDS; i++) {
      collectGarbage();
      const started = performance.now();
      const session = await new SessionStore(sessionsDir).get(key);
      const ms = performance.now() - started;
      if (session.messages.length !== MESSAGES)
        throw new Error(`loaded ${session.messages.length} messages, expected ${MESSAGES}`);
      if (i >= WARMUP) rounds.push(ms);
    }
    const measure: Measure = { name: "load", unit: "ms", rounds, target: TARGET_MS };
    return {
      name: "session-load",
      target: TARGET,
      value: `${median(rounds).toFixed(1)} ms for ${MESSAGES.toLocaleString("en")} messages`,
      pass: median(rounds) <= TARGET_MS,
      measures: [measure],
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * A full collection before each round, so each load starts from the heap a first load meets
 * rather than paying for collecting the previous rounds' 10,000 messages.
 */
function garbageCollector(): () => void {
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as () => void;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const { formatMeasure } = await import("./measure.js");
  const result = await benchSessionLoad();
  console.log(result.value);
  for (const m of result.measures ?? []) console.log(formatMeasure(m));
}
