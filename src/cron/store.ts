/**
 * The cron job file. The gateway's scheduler and `palaver cron` (another
 * process) both change it, so every change is a read-modify-write of the file
 * as it is right now, under a lock held both in-process (a promise chain) and
 * across processes (`jobs.json.lock`, created exclusively, taken over when its
 * owner is dead or it is older than a few seconds). Writes are atomic: a temp
 * file in the same folder, fsync, rename.
 *
 * A file that is not JSON (or not a job list) is renamed aside to
 * `jobs.json.corrupt-<time>` and palaver starts from an empty list; a job that
 * does not validate is skipped with a warning but written back untouched, so
 * nothing a person (or nanobot) wrote is lost.
 */
import { chmod, open, readFile, rename, stat, unlink } from "node:fs/promises";
import { dirname } from "node:path";
import { logger, type Logger } from "../log.js";
import { sleep } from "../util/backoff.js";
import { mkdirPrivate, PRIVATE_FILE_MODE, replaceFilePrivate } from "../util/private-fs.js";
import { corruptPathOf, keepCorrupt } from "../util/jsonl.js";
import { PalaverError, errorMessage } from "../util/errors.js";
import { isFileSystemError, writeFailure } from "../util/write-errors.js";
import { emptySnapshot, type CronJobStore, type StoreSnapshot, type UpdateResult } from "./store-types.js";
import { CronJobSchema, CronStoreFileSchema } from "./types.js";

export interface CronStoreOptions {
  log?: Logger;
  /** How long to wait for another process's lock before giving up (default 3 s). */
  lockTimeoutMs?: number;
  /** A lock file older than this is taken over even if its owner seems alive (default 10 s). */
  staleLockMs?: number;
}

/** Retried once after this pause before a file that does not parse is set aside (an editor may be mid-save). */
const REREAD_DELAY_MS = 150;
const LOCK_RETRY_MS = 20;
/** The jobs hold what people asked for and where it goes: only the owner reads them. */

export type { StoreSnapshot } from "./store-types.js";

export class CronStore implements CronJobStore {
  private readonly log: Logger;
  private readonly lockTimeoutMs: number;
  private readonly staleLockMs: number;
  private tail: Promise<unknown> = Promise.resolve();
  /** Invalid entries already warned about (by JSON), so a poll does not warn every 2 s. */
  private readonly warned = new Set<string>();

  constructor(
    readonly path: string,
    opts: CronStoreOptions = {},
  ) {
    this.log = opts.log ?? logger("cron");
    this.lockTimeoutMs = opts.lockTimeoutMs ?? 3000;
    this.staleLockMs = opts.staleLockMs ?? 10_000;
  }

  get lockPath(): string {
    return `${this.path}.lock`;
  }

  /** One process runs this file's jobs (the pid file tells `palaver cron` which): every run is its to fire. */
  claim(): Promise<boolean> {
    return Promise.resolve(true);
  }

  /** Identifies the file's current version cheaply (inode changes with every atomic write); null when missing. */
  async signature(): Promise<string | null> {
    try {
      const st = await stat(this.path);
      return `${st.ino}:${st.size}:${st.mtimeMs}`;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw err;
    }
  }

  /** The jobs as the file has them now; a missing file is an empty list. */
  async read(): Promise<StoreSnapshot> {
    let text = await this.readText();
    if (text === null) return emptySnapshot();
    let parsed = parseStore(text);
    if (!parsed.ok) {
      await sleep(REREAD_DELAY_MS);
      text = await this.readText();
      if (text === null) return emptySnapshot();
      parsed = parseStore(text);
    }
    if (!parsed.ok) {
      await this.setAside(parsed.error);
      return emptySnapshot();
    }
    const fresh: string[] = [];
    for (const { entry, error } of parsed.problems) {
      const key = JSON.stringify(entry);
      if (this.warned.has(key)) continue;
      this.warned.add(key);
      fresh.push(key);
      const id = entry && typeof entry === "object" ? (entry as { id?: unknown }).id : undefined;
      this.log.warn(
        { path: this.path, id, problem: error, keptIn: corruptPathOf(this.path) },
        "cron job skipped: it is not valid (left in the file for nanobot, a copy kept in the .corrupt file)",
      );
    }
    // Left in jobs.json too: nanobot, sharing the file, may run what palaver cannot read.
    keepCorrupt(corruptPathOf(this.path), fresh, this.log);
    return parsed.snapshot;
  }

  /** Replaces the file atomically. */
  async write(snapshot: StoreSnapshot): Promise<void> {
    const text = serialize(snapshot);
    try {
      await mkdirPrivate(dirname(this.path));
      await replaceFilePrivate(this.path, text);
    } catch (err) {
      throw writeFailure("the cron jobs file", this.path, err);
    }
    await syncDir(dirname(this.path));
  }

  /**
   * Reads the file, lets `change` modify the snapshot, and writes it back if it
   * changed, all under the lock.
   */
  update<T>(change: (snapshot: StoreSnapshot) => T | Promise<T>): Promise<UpdateResult<T>> {
    const run = this.tail.then(() => this.withFileLock(() => this.readModifyWrite(change)));
    this.tail = run.catch(() => undefined);
    return run;
  }

  private async readModifyWrite<T>(
    change: (snapshot: StoreSnapshot) => T | Promise<T>,
  ): Promise<UpdateResult<T>> {
    const snapshot = await this.read();
    const before = serialize(snapshot);
    const result = await change(snapshot);
    if (serialize(snapshot) !== before) await this.write(snapshot);
    // Taken under the lock: a change another process makes right after is then seen as a change.
    const signature = await this.signature();
    return { result, snapshot, signature };
  }

  private async readText(): Promise<string | null> {
    try {
      return await readFile(this.path, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw new PalaverError(`cannot read the cron jobs file ${this.path}: ${errorMessage(err)}`, {
        cause: err,
      });
    }
  }

  private async setAside(problem: string): Promise<void> {
    const aside = `${this.path}.corrupt-${new Date().toISOString().replace(/[:.]/g, "-")}`;
    try {
      await rename(this.path, aside);
      await chmod(aside, PRIVATE_FILE_MODE).catch(() => undefined);
      this.log.error(
        { path: this.path, keptAs: aside, problem },
        "the cron jobs file is not valid; it was set aside and the job list starts empty",
      );
    } catch (err) {
      // Another process set it aside first.
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
  }

  private async withFileLock<T>(fn: () => Promise<T>): Promise<T> {
    await mkdirPrivate(dirname(this.path));
    const deadline = Date.now() + this.lockTimeoutMs;
    for (let attempt = 0; ; attempt++) {
      try {
        const handle = await open(this.lockPath, "wx", PRIVATE_FILE_MODE);
        try {
          await handle.writeFile(String(process.pid));
        } catch (err) {
          // A full disk can take the new lock file but not its pid: left behind, it would lock
          // every later update out until it counts as stale, long after space returned.
          await handle.close();
          await unlink(this.lockPath).catch(() => undefined);
          throw err;
        }
        await handle.close();
        break;
      } catch (err) {
        if (isFileSystemError(err)) throw writeFailure("the cron jobs file", this.path, err);
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
        if (await this.takeOverStaleLock()) continue;
        if (Date.now() >= deadline || attempt > 10_000) {
          throw new PalaverError(`the cron jobs file is locked by another process (${this.lockPath})`, {
            cause: err,
          });
        }
        await sleep(LOCK_RETRY_MS);
      }
    }
    try {
      return await fn();
    } finally {
      await unlink(this.lockPath).catch(() => undefined);
    }
  }

  /** Removes a lock left by a dead process (or a very old one); true when it did. */
  private async takeOverStaleLock(): Promise<boolean> {
    let owner: number | undefined;
    let ageMs: number;
    try {
      const [text, st] = await Promise.all([readFile(this.lockPath, "utf8"), stat(this.lockPath)]);
      owner = /^\d+$/.test(text.trim()) ? Number(text.trim()) : undefined;
      ageMs = Date.now() - st.mtimeMs;
    } catch {
      return true; // gone in the meantime: try again
    }
    const dead = owner !== undefined && owner !== process.pid && !isProcessAlive(owner);
    if (!dead && ageMs < this.staleLockMs) return false;
    this.log.warn({ lock: this.lockPath, owner, ageMs }, "taking over a stale cron store lock");
    await unlink(this.lockPath).catch(() => undefined);
    return true;
  }
}

export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

type ParseResult =
  | { ok: true; snapshot: StoreSnapshot; problems: { entry: unknown; error: string }[] }
  | { ok: false; error: string };

/** Pure: the text of jobs.json to a snapshot, with the entries that did not validate. */
export function parseStore(text: string): ParseResult {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    return { ok: false, error: `not JSON: ${errorMessage(err)}` };
  }
  const top = CronStoreFileSchema.safeParse(json);
  if (!top.success) return { ok: false, error: `not a cron job list: ${top.error.issues[0]?.message ?? ""}` };
  const { version, jobs: entries, ...extra } = top.data;
  const snapshot: StoreSnapshot = { version, jobs: [], invalid: [], extra };
  const problems: { entry: unknown; error: string }[] = [];
  const ids = new Set<string>();
  for (const entry of entries) {
    const job = CronJobSchema.safeParse(entry);
    if (!job.success) {
      snapshot.invalid.push(entry);
      problems.push({
        entry,
        error: job.error.issues.map((i) => `${i.path.join(".") || "(job)"}: ${i.message}`).join("; "),
      });
    } else if (ids.has(job.data.id)) {
      snapshot.invalid.push(entry);
      problems.push({ entry, error: `duplicate id ${job.data.id}` });
    } else {
      ids.add(job.data.id);
      snapshot.jobs.push(job.data);
    }
  }
  return { ok: true, snapshot, problems };
}

/** Pure: a snapshot as the text of jobs.json. */
export function serialize(snapshot: StoreSnapshot): string {
  const doc = { ...snapshot.extra, version: snapshot.version, jobs: [...snapshot.jobs, ...snapshot.invalid] };
  return `${JSON.stringify(doc, null, 2)}\n`;
}

/** So the rename survives a power cut; not every platform can fsync a folder, which is fine. */
async function syncDir(dir: string): Promise<void> {
  try {
    const handle = await open(dir, "r");
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch {
    // best effort
  }
}
