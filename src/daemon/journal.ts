/**
 * The message journal: a JSONL file in the state folder that makes the
 * daemon lose nothing across crashes.
 *
 * - Every admitted inbound message is appended ("in") before the platform is
 *   acknowledged, and marked "done" once its turn has ended (its final reply
 *   is then already in the outbox). Unfinished ones are replayed at startup.
 * - Every final reply is appended ("out") before it is sent and marked
 *   "sent" (or "dropped" after the retry budget) afterwards. Unsent ones are
 *   sent again at startup.
 * - Platform message ids are remembered ("seen") so a redelivered update is
 *   never answered twice.
 *
 * Appends are synchronous writes to one open file: cheap (no fsync; the page
 * cache survives a killed process) and ordered. The file is compacted to the
 * pending entries and recent ids at open and whenever it has grown enough.
 */
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { randomUUID } from "node:crypto";
import { dirname } from "node:path";
import type { InboundMessage, OutboundMessage } from "../bus/types.js";
import { logger, type Logger } from "../log.js";

type Entry =
  | { t: "in"; id: string; at: number; key?: string; msg: InboundMessage }
  | { t: "done"; id: string }
  | { t: "out"; id: string; at: number; msg: OutboundMessage }
  | { t: "sent"; id: string }
  | { t: "dropped"; id: string; reason: string }
  | { t: "seen"; key: string };

export interface PendingInbound {
  id: string;
  msg: InboundMessage;
}
export interface PendingOutbound {
  id: string;
  msg: OutboundMessage;
}

export interface JournalOptions {
  log?: Logger;
  /** Platform message ids remembered for de-duplication. */
  maxSeen?: number;
  /** Appended lines after which the file is compacted. */
  compactEvery?: number;
}

/** The metadata key that carries an inbound message's journal id through the loop. */
export const JOURNAL_ID = "journalId";

export class Journal {
  private fd: number | null = null;
  private readonly pendingIn = new Map<string, PendingInbound>();
  private readonly pendingOut = new Map<string, PendingOutbound>();
  /** Dedupe keys in insertion order (a Map as an ordered set). */
  private readonly seen = new Map<string, true>();
  private appended = 0;
  private readonly log: Logger;
  private readonly maxSeen: number;
  private readonly compactEvery: number;

  constructor(
    readonly path: string,
    opts: JournalOptions = {},
  ) {
    this.log = opts.log ?? logger("journal");
    this.maxSeen = opts.maxSeen ?? 10_000;
    this.compactEvery = opts.compactEvery ?? 5_000;
  }

  /** Reads what an earlier run left, compacts the file and opens it for appending. */
  open(): { inbound: PendingInbound[]; outbound: PendingOutbound[] } {
    mkdirSync(dirname(this.path), { recursive: true });
    if (existsSync(this.path)) this.load(readFileSync(this.path, "utf8"));
    this.compact();
    return { inbound: [...this.pendingIn.values()], outbound: [...this.pendingOut.values()] };
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }

  get pending(): { inbound: number; outbound: number } {
    return { inbound: this.pendingIn.size, outbound: this.pendingOut.size };
  }

  /** Records an admitted message. Returns its journal id, or null when the platform already delivered it. */
  recordInbound(msg: InboundMessage): string | null {
    const key = dedupeKey(msg);
    if (key !== undefined) {
      if (this.seen.has(key)) return null;
      this.remember(key);
    }
    const id = randomUUID();
    this.pendingIn.set(id, { id, msg });
    this.append({ t: "in", id, at: Date.now(), ...(key ? { key } : {}), msg });
    return id;
  }

  /** Replaces a pending message (a reserved one, now with its downloads). */
  updateInbound(id: string, msg: InboundMessage): void {
    const pending = this.pendingIn.get(id);
    if (!pending) return;
    pending.msg = msg;
    // Loading applies entries in order, so a second "in" line with the same id wins.
    this.append({ t: "in", id, at: Date.now(), msg });
  }

  markDone(id: string): void {
    if (!this.pendingIn.delete(id)) return;
    this.append({ t: "done", id });
    this.maybeCompact();
  }

  recordOutbound(msg: OutboundMessage): string {
    const id = randomUUID();
    this.pendingOut.set(id, { id, msg });
    this.append({ t: "out", id, at: Date.now(), msg });
    return id;
  }

  markSent(id: string): void {
    if (!this.pendingOut.delete(id)) return;
    this.append({ t: "sent", id });
    this.maybeCompact();
  }

  markDropped(id: string, reason: string): void {
    if (!this.pendingOut.delete(id)) return;
    this.append({ t: "dropped", id, reason });
    this.maybeCompact();
  }

  private load(text: string): void {
    const lines = text.split("\n");
    lines.forEach((line, index) => {
      if (!line.trim()) return;
      let entry: Entry;
      try {
        entry = JSON.parse(line) as Entry;
      } catch {
        // A torn last line is what a crash mid-append leaves; anything else is worth a warning too.
        this.log.warn({ file: this.path, line: index + 1 }, "journal: skipping a broken line");
        return;
      }
      this.apply(entry);
    });
  }

  private apply(entry: Entry): void {
    switch (entry.t) {
      case "in":
        if (entry.key) this.remember(entry.key);
        this.pendingIn.set(entry.id, { id: entry.id, msg: entry.msg });
        return;
      case "done":
        this.pendingIn.delete(entry.id);
        return;
      case "out":
        this.pendingOut.set(entry.id, { id: entry.id, msg: entry.msg });
        return;
      case "sent":
      case "dropped":
        this.pendingOut.delete(entry.id);
        return;
      case "seen":
        this.remember(entry.key);
        return;
    }
  }

  private remember(key: string): void {
    this.seen.delete(key);
    this.seen.set(key, true);
    if (this.seen.size > this.maxSeen) {
      const oldest = this.seen.keys().next().value;
      if (oldest !== undefined) this.seen.delete(oldest);
    }
  }

  private append(entry: Entry): void {
    this.fd ??= openSync(this.path, "a", 0o600);
    writeSync(this.fd, `${JSON.stringify(entry)}\n`);
    this.appended++;
  }

  private maybeCompact(): void {
    if (this.appended >= this.compactEvery) this.compact();
  }

  /** Rewrites the file with only what is still needed (temp file + rename: a crash keeps the old one). */
  private compact(): void {
    const pendingKeys = new Set(
      [...this.pendingIn.values()].map((p) => dedupeKey(p.msg)).filter((k) => k !== undefined),
    );
    const lines: string[] = [];
    for (const key of this.seen.keys()) {
      if (!pendingKeys.has(key)) lines.push(JSON.stringify({ t: "seen", key } satisfies Entry));
    }
    for (const { id, msg } of this.pendingIn.values()) {
      const key = dedupeKey(msg);
      lines.push(
        JSON.stringify({ t: "in", id, at: Date.now(), ...(key ? { key } : {}), msg } satisfies Entry),
      );
    }
    for (const { id, msg } of this.pendingOut.values()) {
      lines.push(JSON.stringify({ t: "out", id, at: Date.now(), msg } satisfies Entry));
    }
    const temp = `${this.path}.tmp`;
    writeFileSync(temp, lines.length ? `${lines.join("\n")}\n` : "", { mode: 0o600 });
    this.close();
    renameSync(temp, this.path);
    this.appended = 0;
  }
}

/** Identifies a platform message across redeliveries (none when the channel gives no message id). */
export function dedupeKey(msg: InboundMessage): string | undefined {
  const id = msg.metadata?.messageId;
  if (typeof id !== "string" && typeof id !== "number") return undefined;
  return `${msg.channel}:${msg.chatId}:${id}`;
}
