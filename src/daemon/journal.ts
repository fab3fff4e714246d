/**
 * The message journal: a JSONL file in the state folder that makes the
 * daemon lose nothing across crashes.
 *
 * - Every admitted inbound message is appended ("in") before the platform is
 *   acknowledged, and marked "done" once its turn has ended (its final reply
 *   is then already in the outbox). Unfinished ones are replayed at startup.
 * - Each turn begun on a message is appended ("start"). A message whose turns
 *   began `maxStarts` times without ever finishing (it crashes or freezes the
 *   daemon) is a poison message: at the next start it is marked "failed", its
 *   chat is told in plain words through the outbox, and it is never replayed.
 * - Every final reply is appended ("out") before it is sent, one entry per
 *   message whatever turn it belongs to (or none: cron, the message tool), and
 *   marked "sent" afterwards, or "dropped" with the reason (the platform
 *   refused it for good, the retry budget ran out, too many waited for a
 *   channel that was down). Unsent ones are sent again at startup; those for a
 *   channel that is not running wait in the channel manager until it runs.
 * - Platform message ids are remembered ("seen") so a redelivered update is
 *   never answered twice.
 * - A streamed reply's live preview is recorded while it is on screen
 *   ("preview": where its messages are, never their text) until it is
 *   finished, stopped or closed ("previewClosed"). One still open at the next
 *   start was cut off by a crash: the gateway marks it interrupted.
 *
 * Appends are synchronous writes to one open file: cheap (no fsync; the page
 * cache survives a killed process) and ordered. The file is compacted to the
 * pending entries and recent ids at open and whenever it has grown enough.
 *
 * Lines read back are validated (journal-entries.ts, util/jsonl.ts): a bad
 * one is skipped with a warning and kept in `<file>.corrupt`.
 *
 * A write that fails (disk full, read-only, I/O error) never throws to the
 * caller: the in-memory state stays authoritative, messages keep being
 * answered, `health` reports the failure (/readyz), it is logged once per
 * episode, and the whole file is rewritten from memory as soon as a retry
 * succeeds, so nothing is answered twice after recovery. Only a crash during
 * the episode loses what was not written.
 */
import { BoundedMap } from "../util/bounded-map.js";
import { closeSync, mkdirSync, openSync, readFileSync, renameSync, writeFileSync, writeSync } from "node:fs";
import { randomUUID } from "node:crypto";
import { dirname } from "node:path";
import {
  originOf,
  replyPlaceOf,
  SYSTEM_CHANNEL,
  type InboundMessage,
  type OutboundMessage,
} from "../bus/types.js";
import { backoffDelay } from "../util/backoff.js";
import { logger, type Logger } from "../log.js";
import { ConfigError } from "../util/errors.js";
import { readJsonl } from "../util/jsonl.js";
import { describeWriteError } from "../util/write-errors.js";
import { droppedIds, JournalEntry } from "./journal-entries.js";

export interface PendingInbound {
  id: string;
  msg: InboundMessage;
  /** Turns begun on it so far. */
  starts?: number;
}
export interface PendingOutbound {
  id: string;
  msg: OutboundMessage;
  /** When it was first recorded (ms since the epoch; kept across compactions). */
  at?: number;
}
/** A live preview on screen (channels/live-preview.ts): where its messages are, not what they say. */
export interface OpenPreview {
  /** Its own id: one turn may show several previews one after the other. */
  id: string;
  turnId: string;
  channel: string;
  chatId: string;
  /** The thread or topic it is shown in. */
  threadId?: string;
  metadata?: Record<string, unknown>;
  /** The platform's refs of its messages, oldest first. */
  refs: string[];
}

/** The file operations the journal uses; tests inject failing ones (a full disk). */
export interface JournalIo {
  /** Opens the file for appending (created 0600). */
  open(path: string): number;
  /** Writes all of `text` at the end of the file. */
  write(fd: number, text: string): void;
  close(fd: number): void;
  /** Replaces the file with `text` (temp file + rename: a crash keeps the old one). */
  replace(path: string, text: string): void;
}

export const nodeJournalIo: JournalIo = {
  open: (path) => {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    return openSync(path, "a", 0o600);
  },
  write: (fd, text) => {
    // writeSync may write part of the buffer; a torn line would be skipped at the next start.
    const buffer = Buffer.from(text);
    for (let done = 0; done < buffer.length;) done += writeSync(fd, buffer, done);
  },
  close: (fd) => closeSync(fd),
  replace: (path, text) => {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    const temp = `${path}.tmp`;
    writeFileSync(temp, text, { mode: 0o600 });
    renameSync(temp, path);
  },
};

export interface JournalOptions {
  log?: Logger;
  /** Platform message ids remembered for de-duplication. */
  maxSeen?: number;
  /** Open previews remembered; past it the oldest is forgotten (default 1000). */
  maxPreviews?: number;
  /** Appended lines after which the file is compacted. */
  compactEvery?: number;
  /** Turns begun on one message without finishing before it is given up (default 3). */
  maxStarts?: number;
  /** What the chat of a given-up message is told (default {@link giveUpReply}). */
  giveUpReply?: (msg: InboundMessage, starts: number) => OutboundMessage;
  /** First wait before retrying a failed write, doubling up to 30 s (default 1 s). */
  retryBaseMs?: number;
  io?: Partial<JournalIo>;
}

/** Why the journal cannot write, while it cannot (for /readyz). */
export interface JournalHealth {
  ready: boolean;
  error?: string;
  since?: string;
}

/** Message refs journaled per preview (a 4,096-character message each on Telegram: answers longer than this keep the last). */
const MAX_PREVIEW_REFS = 20;

export class Journal {
  private fd: number | null = null;
  private readonly pendingIn = new Map<string, PendingInbound>();
  private readonly pendingOut = new Map<string, PendingOutbound>();
  /** Open previews by their id, oldest first (bounded by `maxPreviews`). */
  private readonly previews = new Map<string, OpenPreview>();
  private readonly maxPreviews: number;
  /** Dedupe keys of the newest platform messages, oldest first. */
  private readonly seen: BoundedMap<string, true>;
  private appended = 0;
  private readonly log: Logger;
  private readonly compactEvery: number;
  private readonly maxStarts: number;
  private readonly io: JournalIo;
  /** The current write-failure episode, if any: nothing is appended until a rewrite succeeds. */
  private failure: { error: string; since: number; attempts: number } | null = null;
  private retryTimer: NodeJS.Timeout | null = null;

  constructor(
    readonly path: string,
    private readonly opts: JournalOptions = {},
  ) {
    this.log = opts.log ?? logger("journal");
    this.seen = new BoundedMap(opts.maxSeen ?? 10_000);
    this.maxPreviews = opts.maxPreviews ?? 1000;
    this.compactEvery = opts.compactEvery ?? 5_000;
    this.maxStarts = opts.maxStarts ?? 3;
    this.io = { ...nodeJournalIo, ...opts.io };
  }

  /**
   * Reads what an earlier run left, gives up poison messages (their chats'
   * notices join the outbound list), compacts the file and opens it for
   * appending. Bad lines and write failures are logged, never thrown.
   */
  open(): { inbound: PendingInbound[]; outbound: PendingOutbound[] } {
    for (const entry of this.read()) this.apply(entry);
    for (const pending of [...this.pendingIn.values()]) {
      if ((pending.starts ?? 0) >= this.maxStarts) this.giveUp(pending);
    }
    this.compactOrFail();
    return { inbound: [...this.pendingIn.values()], outbound: [...this.pendingOut.values()] };
  }

  /**
   * The valid entries of the file. A file that exists but cannot be read is an
   * operator's problem (owner, permissions): exit 78 with its path rather than
   * start without what it holds, or crash-loop under systemd.
   */
  private read(): JournalEntry[] {
    try {
      return readJsonl(this.path, JournalEntry, { log: this.log, what: "journal" }).values;
    } catch (err) {
      throw new ConfigError(
        `cannot read the message journal ${this.path} (${describeWriteError(err)}): ` +
          "fix its owner or permissions (it belongs to the user palaver runs as)",
        [],
        { cause: err },
      );
    }
  }

  /** Closes the file; during a write failure, tries once more to save the state first. */
  close(): void {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    if (this.failure && !this.compactOrFail()) {
      this.log.error(
        { file: this.path, pending: this.pending },
        "journal: could not be saved before exit; the next start may answer some messages again",
      );
    }
    this.closeFile();
  }

  get pending(): { inbound: number; outbound: number } {
    return { inbound: this.pendingIn.size, outbound: this.pendingOut.size };
  }

  /** The previews on screen now; right after open(), those a crash cut off (oldest first). */
  openPreviews(): OpenPreview[] {
    return [...this.previews.values()];
  }

  /** Whether the journal is writing (for /readyz). */
  get health(): JournalHealth {
    if (!this.failure) return { ready: true };
    return { ready: false, error: this.failure.error, since: new Date(this.failure.since).toISOString() };
  }

  /** Records an admitted message. Returns its journal id, or null when the platform already delivered it. */
  recordInbound(msg: InboundMessage): string | null {
    const key = dedupeKey(msg);
    if (key !== undefined) {
      if (this.seen.has(key)) return null;
      this.remember(key);
    }
    const id = randomUUID();
    this.pendingIn.set(id, { id, msg, starts: 0 });
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

  /** A turn begins on message `id`; counted so a message that keeps killing the daemon is given up. */
  markStarted(id: string): void {
    const pending = this.pendingIn.get(id);
    if (!pending) return;
    pending.starts = (pending.starts ?? 0) + 1;
    this.append({ t: "start", id });
  }

  markDone(id: string): void {
    if (!this.pendingIn.delete(id)) return;
    this.append({ t: "done", id });
    this.maybeCompact();
  }

  recordOutbound(msg: OutboundMessage): string {
    const id = randomUUID();
    const at = Date.now();
    this.pendingOut.set(id, { id, msg, at });
    this.append({ t: "out", id, at, msg });
    return id;
  }

  /** Whether reply `id` still waits to be sent (not sent, not dropped). */
  isPendingOut(id: string): boolean {
    return this.pendingOut.has(id);
  }

  /**
   * Takes in the replies `palaver outbox drop` dropped while this process runs: that command appends
   * "dropped" lines to the file (daemon/outbox-file.ts), which only this re-read brings into memory.
   * Called before held replies are sent and before every compaction (which would otherwise write
   * them back as pending). Only "dropped" lines are parsed, quietly: bad lines were reported at open.
   */
  syncExternalDrops(): void {
    if (this.pendingOut.size === 0) return;
    let text: string;
    try {
      text = readFileSync(this.path, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
        this.log.warn({ file: this.path, err }, "journal: could not re-read it for dropped replies");
      }
      return;
    }
    for (const id of droppedIds(text)) {
      if (this.pendingOut.delete(id))
        this.log.info({ id }, "journal: reply dropped by `palaver outbox drop`");
    }
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

  /** A preview is on screen, or has one more message: recorded again whole (a small line, no text). */
  recordPreview(preview: OpenPreview): void {
    const { id, turnId, channel, chatId, threadId, metadata, refs } = preview;
    // The newest refs only: the last message is the one a restart marks interrupted.
    const kept: OpenPreview = {
      id,
      turnId,
      channel,
      chatId,
      ...(threadId !== undefined ? { threadId } : {}),
      ...(metadata ? { metadata } : {}),
      refs: refs.slice(-MAX_PREVIEW_REFS),
    };
    this.keepPreview(kept);
    this.append({ t: "preview", ...kept });
  }

  /** The preview was finished, stopped or closed (or repaired after a crash). */
  closePreview(id: string): void {
    if (!this.previews.delete(id)) return;
    this.append({ t: "previewClosed", id });
    this.maybeCompact();
  }

  /** A poison message: its chat is told (through the outbox, so the notice survives a crash too), then it is dropped. */
  private giveUp(pending: PendingInbound): void {
    const starts = pending.starts ?? 0;
    this.log.error(
      { id: pending.id, channel: pending.msg.channel, chatId: pending.msg.chatId, starts },
      `journal: a message was started ${starts} times without finishing; giving it up (it will not be replayed)`,
    );
    this.recordOutbound((this.opts.giveUpReply ?? giveUpReply)(pending.msg, starts));
    this.pendingIn.delete(pending.id);
    this.append({ t: "failed", id: pending.id, starts });
  }

  private apply(entry: JournalEntry): void {
    switch (entry.t) {
      case "in": {
        if (entry.key) this.remember(entry.key);
        const starts = entry.starts ?? this.pendingIn.get(entry.id)?.starts ?? 0;
        this.pendingIn.set(entry.id, { id: entry.id, msg: entry.msg, starts });
        return;
      }
      case "start": {
        const pending = this.pendingIn.get(entry.id);
        if (pending) pending.starts = (pending.starts ?? 0) + 1;
        return;
      }
      case "done":
      case "failed":
        this.pendingIn.delete(entry.id);
        return;
      case "out":
        this.pendingOut.set(entry.id, { id: entry.id, msg: entry.msg, at: entry.at });
        return;
      case "sent":
      case "dropped":
        this.pendingOut.delete(entry.id);
        return;
      case "seen":
        this.remember(entry.key);
        return;
      case "preview": {
        const { t: _t, ...preview } = entry;
        this.keepPreview(preview);
        return;
      }
      case "previewClosed":
        this.previews.delete(entry.id);
        return;
    }
  }

  /** Past the bound the oldest is forgotten: a stale preview left as it is, not a growing file. */
  private keepPreview(preview: OpenPreview): void {
    this.previews.delete(preview.id);
    this.previews.set(preview.id, preview);
    for (const oldest of this.previews.keys()) {
      if (this.previews.size <= this.maxPreviews) break;
      this.previews.delete(oldest);
    }
  }

  private remember(key: string): void {
    this.seen.set(key, true);
  }

  private append(entry: JournalEntry): void {
    // During a failure episode the memory is ahead of the file; the recovery rewrite saves it all, in order.
    if (this.failure) return;
    try {
      this.fd ??= this.io.open(this.path);
      this.io.write(this.fd, `${JSON.stringify(entry)}\n`);
      this.appended++;
    } catch (err) {
      this.fail(err);
    }
  }

  private maybeCompact(): void {
    if (this.appended >= this.compactEvery) this.compactOrFail();
  }

  /** Compacts; a failure starts (or continues) a failure episode. Returns whether the file is now current. */
  private compactOrFail(): boolean {
    try {
      this.compact();
    } catch (err) {
      this.fail(err);
      return false;
    }
    if (this.failure) {
      this.log.warn(
        { file: this.path, downForMs: Date.now() - this.failure.since, attempts: this.failure.attempts },
        "journal: writing again; everything held in memory meanwhile is saved",
      );
      this.failure = null;
    }
    return true;
  }

  /** Rewrites the file with only what is still needed. */
  private compact(): void {
    this.syncExternalDrops();
    const pendingKeys = new Set(
      [...this.pendingIn.values()].map((p) => dedupeKey(p.msg)).filter((k) => k !== undefined),
    );
    const lines: string[] = [];
    const line = (entry: JournalEntry) => lines.push(JSON.stringify(entry));
    for (const key of this.seen.keys()) if (!pendingKeys.has(key)) line({ t: "seen", key });
    for (const { id, msg, starts } of this.pendingIn.values()) {
      const key = dedupeKey(msg);
      line({ t: "in", id, at: Date.now(), ...(key ? { key } : {}), ...(starts ? { starts } : {}), msg });
    }
    for (const { id, msg, at } of this.pendingOut.values()) line({ t: "out", id, at: at ?? Date.now(), msg });
    for (const preview of this.previews.values()) line({ t: "preview", ...preview });
    this.closeFile();
    this.io.replace(this.path, lines.length ? `${lines.join("\n")}\n` : "");
    this.appended = 0;
  }

  /** Starts or continues a failure episode: logged once, retried with backoff until a rewrite succeeds. */
  private fail(err: unknown): void {
    // The file may end in a torn line; the recovery rewrite replaces it whole.
    this.closeFile();
    const error = describeWriteError(err);
    if (!this.failure) {
      this.failure = { error, since: Date.now(), attempts: 0 };
      this.log.error(
        { file: this.path, err },
        `journal: cannot write (${error}); messages are still answered but are not crash-safe until it can; retrying`,
      );
    }
    this.failure.error = error;
    this.failure.attempts++;
    if (this.retryTimer) return;
    const delayMs = backoffDelay(this.failure.attempts - 1, this.opts.retryBaseMs ?? 1000, 30_000);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.compactOrFail();
    }, delayMs);
    // A retry alone must not keep a stopping daemon alive.
    this.retryTimer.unref();
  }

  private closeFile(): void {
    const fd = this.fd;
    this.fd = null;
    if (fd === null) return;
    try {
      this.io.close(fd);
    } catch {
      // Closing after a failed write can fail the same way; the descriptor is released anyway.
    }
  }
}

/** What a chat is told when its message is given up: plain words, and what to do. */
export function giveUpReply(msg: InboundMessage, starts: number): OutboundMessage {
  const origin = originOf(msg);
  const text = msg.content.replace(/\s+/g, " ").trim();
  const quoted = text.length > 60 ? `${text.slice(0, 60)}…` : text;
  const what = msg.channel === SYSTEM_CHANNEL ? "a background task" : "your message";
  const messageId = msg.channel === SYSTEM_CHANNEL ? undefined : msg.messageId;
  return {
    channel: origin.channel,
    chatId: origin.chatId,
    content:
      `I could not finish answering ${what}${quoted ? ` ("${quoted}")` : ""} after ${starts} attempts; ` +
      "something in it stops me every time, so I will not try it again. Please send it again, " +
      "perhaps in other words, or start over with /new.",
    kind: "final",
    ...(messageId ? { replyTo: messageId } : {}),
    ...replyPlaceOf(origin),
    ...(origin.metadata ? { metadata: origin.metadata } : {}),
  };
}

/** Identifies a platform message across redeliveries (none when the channel gives no message id). */
export function dedupeKey(msg: InboundMessage): string | undefined {
  return msg.messageId === undefined ? undefined : `${msg.channel}:${msg.chatId}:${msg.messageId}`;
}
