/**
 * Loaded into the soak's gateway child with `--import` (a bench-only preload; the gateway knows
 * nothing of it), with --expose-gc: on the bench's "heap" message over the IPC channel it runs a
 * full garbage collection and answers with the heap and RSS left after it, so growth measured
 * between two points is what is still reachable, not where the collector happened to be. With
 * `snapshot` set it also writes a heap snapshot there (for a look at what grew).
 */
import process from "node:process";
import { setTimeout } from "node:timers";
import { writeHeapSnapshot } from "node:v8";

/** Lets the FinalizationRegistry callbacks of the last collection run (fetch cleans up in them). */
const FINALIZERS_MS = 100;

process.on("message", (msg) => {
  if (msg?.type !== "heap") return;
  globalThis.gc();
  setTimeout(() => answer(msg), FINALIZERS_MS);
});

function answer(msg) {
  globalThis.gc();
  const { heapUsed, heapTotal, rss } = process.memoryUsage();
  const snapshot = msg.snapshot ? writeHeapSnapshot(msg.snapshot) : undefined;
  process.send({ type: "heap", id: msg.id, heapUsed, heapTotal, rss, snapshot });
}
// The channel must not keep the gateway alive once it is asked to stop.
process.channel.unref();
