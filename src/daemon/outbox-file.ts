/**
 * The journal's outbox as another process sees it (`palaver status`, `palaver outbox`): the replies
 * not yet delivered, read from the file, and dropping some of them safely while a gateway runs.
 *
 * The file belongs to the gateway, which appends to it and now and then replaces it whole
 * (compaction). So this side never rewrites it: a drop is one more "dropped" line, appended in a
 * single write (O_APPEND: never interleaved with the gateway's lines). A running gateway re-reads
 * those lines before it sends held replies and before each compaction (Journal.syncExternalDrops).
 * A line appended just as a compaction replaces the file could land in the replaced one; so the
 * drop reads the file back and writes again until its lines are in the current one.
 */
import { appendFileSync } from "node:fs";
import { join } from "node:path";
import type { OutboundMessage } from "../bus/types.js";
import { logger, type Logger } from "../log.js";
import { readJsonl } from "../util/jsonl.js";
import { JournalEntry } from "./journal-entries.js";

export interface OutboxEntry {
  id: string;
  msg: OutboundMessage;
  /** When it was recorded (ms since the epoch), when the file says. */
  at?: number;
}

/** The message journal of the state folder `state` (the gateway's, read here). */
export function messageJournalPath(state: string): string {
  return join(state, "journal", "messages.jsonl");
}

/** Attempts at making the drop lines land in the current file (see the top of this file). */
const MAX_DROP_WRITES = 5;

/** The replies still waiting in the journal at `path`, oldest first (a missing file has none). */
export function readOutbox(path: string, log: Logger = logger("outbox")): OutboxEntry[] {
  const pending = new Map<string, OutboxEntry>();
  for (const entry of readJsonl(path, JournalEntry, { log, what: "journal" }).values) {
    if (entry.t === "out") pending.set(entry.id, { id: entry.id, msg: entry.msg, at: entry.at });
    else if (entry.t === "sent" || entry.t === "dropped") pending.delete(entry.id);
  }
  return [...pending.values()];
}

/** Undelivered replies per channel, for status. */
export function countByChannel(entries: readonly { msg: { channel: string } }[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const { msg } of entries) counts[msg.channel] = (counts[msg.channel] ?? 0) + 1;
  return counts;
}

/** Pure: the held replies per channel in words ("telegram 2, slack 1"), or "none". */
export function formatHeldCounts(counts: Record<string, number>): string {
  const parts = Object.entries(counts)
    .filter(([, n]) => n > 0)
    .map(([channel, n]) => `${channel} ${n}`);
  return parts.length ? parts.join(", ") : "none";
}

/** The /status line about replies waiting for a channel that is not running (none when there are none). */
export function heldStatusLines(counts: Record<string, number>): string[] {
  const words = formatHeldCounts(counts);
  return words === "none" ? [] : [`Held replies: ${words} (palaver outbox list)`];
}

/**
 * Marks replies `ids` dropped with `reason`; returns those that were still waiting (the others were
 * sent or dropped meanwhile).
 */
export function dropFromOutbox(path: string, ids: readonly string[], reason: string, log?: Logger): string[] {
  const wanted = new Set(ids);
  const stillPending = () => readOutbox(path, log).filter((e) => wanted.has(e.id));
  const dropped = stillPending().map((e) => e.id);
  let left = dropped;
  for (let attempt = 0; left.length > 0; attempt++) {
    if (attempt === MAX_DROP_WRITES) {
      throw new Error(`could not mark ${left.length} replies dropped in ${path}: it keeps being replaced`);
    }
    const lines = left.map((id) => JSON.stringify({ t: "dropped", id, reason } satisfies JournalEntry));
    appendFileSync(path, `${lines.join("\n")}\n`, { mode: 0o600 });
    left = stillPending().map((e) => e.id);
  }
  return dropped;
}
