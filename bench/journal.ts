/**
 * Journal overhead: what the durable inbox and outbox add to one message
 * (record the inbound, mark it done, record the reply, mark it sent).
 * Target: p50 ≤ 1 ms per message.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { Journal } from "../src/daemon/journal.js";
import { percentile } from "./helpers.js";
import type { BenchResult } from "./types.js";

const MESSAGES = 5000;
export const TARGET = "journal work per message (inbound + done + reply + sent): p50 ≤ 1 ms";

export async function benchJournal(): Promise<BenchResult> {
  const dir = await mkdtemp(join(tmpdir(), "palaver-bench-journal-"));
  const journal = new Journal(join(dir, "messages.jsonl"));
  journal.open();
  try {
    const samples: number[] = [];
    const content = "a realistic message of a few words ".repeat(4);
    for (let i = 0; i < MESSAGES; i++) {
      const started = performance.now();
      const id = journal.recordInbound({
        channel: "telegram",
        senderId: "42",
        chatId: "42",
        content,
        metadata: { messageId: i, username: "someone" },
      });
      journal.markDone(id!);
      journal.markSent(journal.recordOutbound({ channel: "telegram", chatId: "42", content }));
      samples.push(performance.now() - started);
    }
    const p50 = percentile(samples, 50);
    return {
      name: "journal",
      target: TARGET,
      value: `p50 ${(p50 * 1000).toFixed(0)} µs, p99 ${(percentile(samples, 99) * 1000).toFixed(0)} µs (compaction included)`,
      pass: p50 <= 1,
    };
  } finally {
    journal.close();
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  console.log(await benchJournal());
}
