/**
 * A small JSON file in the state folder that two processes share: the gateway
 * and a CLI command (`palaver pairing approve`, `palaver approvals revoke`).
 *
 * Every read first compares the file's stamp (mtime, size, inode) with the one
 * last loaded and reloads on a change, so what one process writes reaches the
 * other at its next read with no restart and no watcher. Writes replace the
 * file atomically (0600 in a 0700 folder; a reader sees the old value or the
 * new one). A file that cannot be parsed is moved aside (`<name>.corrupt-<ms>`)
 * with a warning and the value starts empty; one that cannot be read at all
 * (permissions) keeps the value last read, warned about once, and a write
 * refuses to overwrite it.
 */
import { randomBytes } from "node:crypto";
import {
  closeSync,
  fsyncSync,
  openSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { dirname } from "node:path";
import type { Logger } from "pino";
import { errorMessage } from "./errors.js";
import { writeFailure } from "./write-errors.js";
import { mkdirPrivateSync, PRIVATE_FILE_MODE } from "./private-fs.js";
import type { DocumentChange, DocumentKind, SharedDocument } from "./shared-document.js";

export interface StateFileOptions<T> extends DocumentKind<T> {
  log: Logger;
}

export class StateFile<T> implements SharedDocument<T> {
  private value: T;
  /** The version of the file `value` came from; "missing" when there is none, null before the first read. */
  private stamp: string | null = null;
  private readError: string | null = null;

  constructor(
    readonly path: string,
    private readonly opts: StateFileOptions<T>,
  ) {
    this.value = opts.empty();
  }

  /** The value as the file has it now (one statSync when it has not changed). */
  read(): T {
    this.refresh(false);
    return this.value;
  }

  /** True when the file changed since it was last read or written here (for a poller). */
  changed(): boolean {
    try {
      return stampOf(this.path) !== this.stamp;
    } catch {
      return false;
    }
  }

  /**
   * Read-modify-write: `change` gets the value as the file has it right now and returns the new one
   * (or undefined to write nothing). Throws when the file cannot be read, so it is never overwritten
   * with a stale value.
   */
  update<R>(change: DocumentChange<T, R>): R {
    this.refresh(true);
    const { next, result } = change(this.value);
    if (next !== undefined) this.write(next);
    return result;
  }

  private write(value: T): void {
    try {
      mkdirPrivateSync(dirname(this.path));
      replaceSync(this.path, `${JSON.stringify(value, null, 2)}\n`);
    } catch (err) {
      throw writeFailure(this.opts.what, this.path, err);
    }
    this.value = value;
    this.stamp = stampOf(this.path);
  }

  private refresh(strict: boolean): void {
    try {
      const stamp = stampOf(this.path);
      if (stamp === this.stamp) return;
      this.value = stamp === "missing" ? this.opts.empty() : this.load();
      this.stamp = stampOf(this.path);
      this.readError = null;
    } catch (err) {
      if (strict) throw err;
      const why = errorMessage(err);
      if (why !== this.readError)
        this.opts.log.warn({ path: this.path, err: why }, `cannot read ${this.opts.what}`);
      this.readError = why;
    }
  }

  private load(): T {
    let text: string;
    try {
      text = readFileSync(this.path, "utf8");
    } catch (err) {
      // Removed between the stat and the read.
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return this.opts.empty();
      throw err;
    }
    let problem: string;
    try {
      const parsed = this.opts.schema.safeParse(JSON.parse(text));
      if (parsed.success) return parsed.data;
      problem = parsed.error.issues
        .map((i) => `${i.path.join(".") || "(top level)"}: ${i.message}`)
        .join("; ");
    } catch (err) {
      problem = `not JSON: ${(err as Error).message}`;
    }
    const aside = `${this.path}.corrupt-${Date.now()}`;
    try {
      renameSync(this.path, aside);
    } catch (err) {
      // Another process moved or replaced it first.
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
    this.opts.log.warn(
      { path: this.path, movedTo: aside, problem },
      `${this.opts.what} is not valid; moved it aside and starting ${this.opts.startsAs ?? "empty"}`,
    );
    return this.opts.empty();
  }
}

function stampOf(path: string): string {
  try {
    const st = statSync(path);
    // The inode changes with every atomic replacement, so two writes within one mtime tick still differ.
    return `${st.mtimeMs}:${st.size}:${st.ino}`;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return "missing";
    throw err;
  }
}

/** private-fs.ts replaceFilePrivate, synchronously: callers decide without awaiting and the file is small. */
function replaceSync(path: string, data: string): void {
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  try {
    const fd = openSync(tmp, "wx", PRIVATE_FILE_MODE);
    try {
      writeSync(fd, data);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (err) {
    try {
      unlinkSync(tmp);
    } catch {
      // Never created, or already renamed.
    }
    throw err;
  }
}
