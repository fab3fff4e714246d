/**
 * Session append: saving a turn must cost the same for a long session as for
 * a new one, because the store appends lines and never reads or rewrites the
 * file per turn. Times one turn (user + assistant message) appended to a
 * 100,000-message session and to an empty one, interleaved, and compares the
 * medians. Target: append to 100,000-message session ≤ 2× empty session.
 */
import { mkdtemp, open, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { Session } from "../src/sessions/session.js";
import { SessionStore, formatTimestamp } from "../src/sessions/store.js";
import type { BenchResult } from "./types.js";

const BIG = 100_000;
const ROUNDS = 200;
const WARMUP = 20;
export const TARGET = "append to 100,000-message session ≤ 2× empty session";

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Writes a session file of `count` messages directly (not through the store), in batches. */
export async function writeBigSession(path: string, key: string, count: number): Promise<void> {
  const stamp = formatTimestamp(new Date());
  const fh = await open(path, "w");
  try {
    await fh.write(
      JSON.stringify({
        _type: "metadata",
        key,
        created_at: stamp,
        updated_at: stamp,
        metadata: {},
        last_consolidated: 0,
      }) + "\n",
    );
    for (let i = 0; i < count; i += 1000) {
      let chunk = "";
      for (let j = i; j < Math.min(count, i + 1000); j++) {
        const role = j % 2 === 0 ? "user" : "assistant";
        chunk +=
          JSON.stringify({ role, content: `message ${j}: ${"lorem ipsum ".repeat(15)}`, timestamp: stamp }) +
          "\n";
      }
      await fh.write(chunk);
    }
  } finally {
    await fh.close();
  }
}

async function timeTurn(store: SessionStore, session: Session, i: number): Promise<number> {
  const started = performance.now();
  await store.append(session, [
    { role: "user", content: `question ${i}: what is on my calendar tomorrow?` },
    { role: "assistant", content: `answer ${i}: ${"you have a meeting at ten. ".repeat(4)}` },
  ]);
  return performance.now() - started;
}

export async function benchSessionAppend(): Promise<BenchResult> {
  const dir = await mkdtemp(join(tmpdir(), "palaver-bench-append-"));
  const store = new SessionStore(join(dir, "sessions"));
  try {
    // The store creates the folder on demand; the big file is written before it exists.
    const probe = await store.get("bench:probe");
    await store.saveMetadata(probe);
    await writeBigSession(store.pathFor("bench:big"), "bench:big", BIG);

    const loadStarted = performance.now();
    const big = await store.get("bench:big");
    const loadMs = performance.now() - loadStarted;
    if (big.messages.length !== BIG)
      throw new Error(`loaded ${big.messages.length} messages, expected ${BIG}`);
    const empty = await store.get("bench:empty");

    for (let i = 0; i < WARMUP; i++) {
      await timeTurn(store, big, i);
      await timeTurn(store, empty, i);
    }
    const bigMs: number[] = [];
    const emptyMs: number[] = [];
    // Interleaved, alternating which goes first, so drift in disk or CPU hits both alike.
    for (let i = 0; i < ROUNDS; i++) {
      if (i % 2 === 0) {
        bigMs.push(await timeTurn(store, big, i));
        emptyMs.push(await timeTurn(store, empty, i));
      } else {
        emptyMs.push(await timeTurn(store, empty, i));
        bigMs.push(await timeTurn(store, big, i));
      }
    }
    const b = median(bigMs);
    const e = median(emptyMs);
    const ratio = b / e;
    return {
      name: "session-append",
      target: TARGET,
      value:
        `median per turn: ${b.toFixed(3)} ms at ${BIG.toLocaleString("en")} messages, ` +
        `${e.toFixed(3)} ms empty (${ratio.toFixed(2)}×); loading the big session took ${loadMs.toFixed(0)} ms`,
      pass: ratio <= 2,
    };
  } finally {
    // Its open files, and the 100,000 messages it holds, must not outlive the benchmark: the next
    // ones run in the same process (session-load's rounds each start with a full collection).
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  console.log(await benchSessionAppend());
}
