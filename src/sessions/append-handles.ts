/**
 * Open append handles of session files, so a turn's append is one write instead of
 * open + write + close. Bounded: at most `max` files are held open (the least recently used
 * one is closed first) and a file untouched for `idleMs` is closed. A handle is used only while
 * it is still the file at its path (same inode): a file replaced by another writer's atomic
 * rewrite or deleted (a removed cron job's session) is reopened at its path. That is checked at
 * most once per `recheckMs` per file: a stat per append cost 0.1 ms of CPU per message at 100
 * chats at once, and the store's own rewrites (/new, compaction) close the handle first anyway.
 * The stat is synchronous, like the append that follows it (a few µs on a local file): through
 * the thread pool it cost ~45 µs of main-thread CPU and held the append, and so the turn's reply,
 * behind the pool's queue.
 *
 * Closing goes through `schedule(key, close)`, the store's per-session write queue, so a handle
 * is never closed under a write in flight.
 */
import { statSync, type Stats } from "node:fs";
import type { FileHandle } from "node:fs/promises";

/**
 * More than the chats that write at once: with fewer handles than active chats every append
 * evicts one and reopens its own, which bench/throughput.ts (100 chats at once) shows as CPU per
 * message. Far below the usual limit of 1,024 open files per process.
 */
const MAX_OPEN = 256;

export interface AppendHandlesOptions {
  /** Files held open at most (default MAX_OPEN). */
  max?: number;
  /** A file not appended to for this long is closed (default 60 s). */
  idleMs?: number;
  /** How long a handle is trusted to still be the file at its path before it is checked again (default 1 s). */
  recheckMs?: number;
  /** Runs `work` after the writes queued for session `key` (the store's KeyedQueue). */
  schedule(key: string, work: () => Promise<void>): void;
}

interface Entry {
  path: string;
  fh: FileHandle;
  dev: number;
  ino: number;
  idle: NodeJS.Timeout;
  /** When the handle was last seen to be the file at its path (performance.now()). */
  checkedAt: number;
}

export class AppendHandles {
  /** Session key → its open file; Map order is use order, the least recently used first. */
  private readonly entries = new Map<string, Entry>();
  private readonly max: number;
  private readonly idleMs: number;
  private readonly recheckMs: number;

  constructor(private readonly opts: AppendHandlesOptions) {
    this.max = opts.max ?? MAX_OPEN;
    this.idleMs = opts.idleMs ?? 60_000;
    this.recheckMs = opts.recheckMs ?? 1000;
  }

  get size(): number {
    return this.entries.size;
  }

  /**
   * The open handle of `key`'s file when it is still the file at `path`; undefined otherwise (a
   * stale handle is closed). Call it from inside the key's write queue.
   */
  async get(key: string, path: string): Promise<FileHandle | undefined> {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.path !== path) {
      await this.close(key);
      return undefined;
    }
    const now = performance.now();
    if (now - entry.checkedAt >= this.recheckMs) {
      const current = statIfThere(path);
      if (current?.ino !== entry.ino || current.dev !== entry.dev) {
        await this.close(key);
        return undefined;
      }
      entry.checkedAt = now;
    }
    this.entries.delete(key);
    this.entries.set(key, entry);
    entry.idle.refresh();
    return entry.fh;
  }

  /** Holds `fh` (open on `path`) for `key`'s next appends; the least recently used beyond `max` is closed. */
  async keep(key: string, path: string, fh: FileHandle): Promise<void> {
    const { dev, ino } = await fh.stat();
    const previous = this.entries.get(key);
    if (previous && previous.fh !== fh) await this.close(key);
    const idle = setTimeout(() => this.closeLater(key), this.idleMs);
    idle.unref();
    this.entries.delete(key);
    this.entries.set(key, { path, fh, dev, ino, idle, checkedAt: performance.now() });
    while (this.entries.size > this.max) {
      const oldest = this.entries.keys().next().value as string;
      this.closeLater(oldest);
    }
  }

  /** Closes `key`'s handle now (from inside its write queue: before a rewrite, on invalidate). */
  async close(key: string): Promise<void> {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    clearTimeout(entry.idle);
    await entry.fh.close().catch(() => undefined);
  }

  /** Closes every handle (shutdown; the store has flushed its writes first). */
  async closeAll(): Promise<void> {
    await Promise.all([...this.entries.keys()].map((key) => this.close(key)));
  }

  /** Forgets `key`'s handle at once and closes it once the key's queued writes are done. */
  private closeLater(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    clearTimeout(entry.idle);
    this.opts.schedule(key, () => entry.fh.close().catch(() => undefined));
  }
}

/** The file's identity at `path`, or undefined when there is none (or it cannot be looked at). */
function statIfThere(path: string): Stats | undefined {
  try {
    return statSync(path, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}
