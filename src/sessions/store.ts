/**
 * Sessions as JSONL files, in nanobot's format (see ARCHITECTURE.md,
 * "Workspace files"): a metadata line, then one message per line. A turn only
 * ever appends, so its cost does not grow with the session; the file is
 * rewritten only on explicit clear/compaction, atomically (temp + rename).
 */
import { writeSync } from "node:fs";
import { open, readdir, readFile, rename, stat, unlink, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import type { ChatMessage } from "../llm/types.js";
import { logger, type Logger } from "../log.js";
import { PalaverError, errorMessage } from "../util/errors.js";
import { writeFailure } from "../util/write-errors.js";
import { mkdirPrivate, PRIVATE_FILE_MODE, replaceFilePrivate } from "../util/private-fs.js";
import { corruptPathOf, keepCorrupt } from "../util/jsonl.js";
import { BoundedMap } from "../util/bounded-map.js";
import { KeyedQueue } from "../util/keyed-queue.js";
import { AppendHandles } from "./append-handles.js";
import { isObject, readLines, type MetadataLine } from "./file-lines.js";
import { SAVED_TURN, type SavedTurn } from "./saved-turn.js";
import { Session } from "./session.js";
import type { SessionFileInfo, SessionStorage } from "./storage.js";

/** Where a workspace keeps its session files (nanobot's layout). */
export function sessionsDirOf(workspace: string): string {
  return join(workspace, "sessions");
}

/** nanobot's file name for a key: ':' and other characters unsafe in file names become '_'. */
export function safeKey(key: string): string {
  const safe = key
    .replace(/:/g, "_")
    .replace(/[<>:"/\\|?*]/g, "_")
    .trim();
  return safe === "" ? "_" : safe;
}

const pad = (n: number, width = 2): string => String(n).padStart(width, "0");

/**
 * Python's `datetime.now().isoformat()`: local time, no zone, microseconds
 * ("2025-02-01T10:00:00.123000"). nanobot compares these with naive local
 * datetimes, so writing anything else could break a nanobot reading our files.
 */
export function formatTimestamp(d: Date): string {
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}` +
    `T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}000`
  );
}

const NAIVE_ISO = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?$/;

/** Reads both nanobot's naive local form and full ISO strings with a zone; undefined when unreadable. */
export function parseTimestamp(value: unknown): Date | undefined {
  if (typeof value !== "string" || value === "") return undefined;
  const m = NAIVE_ISO.exec(value);
  const d = m
    ? new Date(
        Number(m[1]),
        Number(m[2]) - 1,
        Number(m[3]),
        Number(m[4]),
        Number(m[5]),
        Number(m[6] ?? 0),
        Number((m[7] ?? "0").slice(0, 3).padEnd(3, "0")),
      )
    : new Date(value);
  return Number.isNaN(d.getTime()) ? undefined : d;
}

export function metadataLine(session: Session): string {
  // Exactly nanobot's keys, in nanobot's order.
  return (
    JSON.stringify({
      _type: "metadata",
      key: session.key,
      created_at: formatTimestamp(session.createdAt),
      updated_at: formatTimestamp(session.updatedAt),
      metadata: session.metadata,
      last_consolidated: session.lastConsolidated,
    }) + "\n"
  );
}

function isErrno(err: unknown, code: string): boolean {
  return isObject(err) && err.code === code;
}

/** Session files hold whole conversations: only the owner reads them. */
const FILE_MODE = PRIVATE_FILE_MODE;
/** Warnings per file before the rest are only counted, so a mangled file cannot flood the log. */
const MAX_LINE_WARNINGS = 10;
/** Messages per write while rewriting a file, to avoid one giant string for a huge session. */
const REWRITE_BATCH = 1000;
/** Bytes read to find the key on a file's first line (list()). */
const FIRST_LINE_BYTES = 64 * 1024;
/** Files looked at concurrently by list(). */
const LIST_CONCURRENCY = 16;
/** Sessions kept in memory while unused: a chat's next message does not wait for its file to load. */
const KEEP_SESSIONS = 200;

export class SessionStore implements SessionStorage {
  private readonly log: Logger;
  /**
   * The sessions in memory, one instance per key. The `keepSessions` most recently used are held
   * here; any other stays only while someone holds it (a turn, a consolidation, a queued write):
   * then get() hands out that same object, and once nobody does it is collected and the next get()
   * reads the file. Without this every chat ever seen would stay in memory.
   */
  private readonly recent: BoundedMap<string, Session>;
  private readonly live = new Map<string, WeakRef<Session>>();
  private readonly loading = new Map<string, Promise<Session>>();
  private readonly collected = new FinalizationRegistry<string>((key) => {
    if (this.live.get(key)?.deref() === undefined) this.live.delete(key);
  });
  /** Writes to one session file run one after the other; one failed write never blocks the next. */
  private readonly writes = new KeyedQueue();
  private dirReady: Promise<void> | undefined;
  /**
   * Session files held open after an append: their last line is ours, so the next append is a
   * plain write. Closed when idle, when too many are open, before a rewrite and by close().
   */
  private readonly handles: AppendHandles;
  /**
   * Told of every append, after the messages are in the session (memory search indexes them).
   * Called synchronously: it must only take note and never throw.
   */
  onAppended: ((key: string, messages: readonly ChatMessage[]) => void) | undefined;
  /** Where clear() moves the old file instead of losing it (memory search still finds it); absent: dropped. */
  readonly archiveDir: string | undefined;

  constructor(
    readonly sessionsDir: string,
    log?: Logger,
    opts: {
      maxOpenFiles?: number;
      idleCloseMs?: number;
      recheckOpenFilesMs?: number;
      archiveDir?: string;
      keepSessions?: number;
    } = {},
  ) {
    this.log = log ?? logger("sessions");
    this.recent = new BoundedMap(opts.keepSessions ?? KEEP_SESSIONS);
    this.archiveDir = opts.archiveDir;
    this.handles = new AppendHandles({
      max: opts.maxOpenFiles,
      idleMs: opts.idleCloseMs,
      recheckMs: opts.recheckOpenFilesMs,
      schedule: (key, work) => this.writes.push(key, work),
    });
  }

  pathFor(key: string): string {
    return join(this.sessionsDir, `${safeKey(key)}.jsonl`);
  }

  /** Loads the session (or creates an empty one); one shared instance per key. */
  get(key: string): Promise<Session> {
    const session = this.live.get(key)?.deref();
    if (session) {
      this.recent.set(key, session);
      return Promise.resolve(session);
    }
    let pending = this.loading.get(key);
    if (!pending) {
      const loading = this.load(key).then((loaded) => {
        // Not when invalidated meanwhile: the next get() reads the file again.
        if (this.loading.get(key) === loading) this.remember(loaded);
        return loaded;
      });
      pending = loading;
      this.loading.set(key, loading);
      // Settled either way, it leaves `loading`; a failed load is not remembered: the next get() tries again.
      const done = () => {
        if (this.loading.get(key) === loading) this.loading.delete(key);
      };
      void loading.then(done, done);
    }
    return pending;
  }

  /** Forgets the in-memory copy; the next get() reads the file again. */
  async earlierMessages(session: Session): Promise<ChatMessage[]> {
    if (session.forgotten === 0) return [];
    // Still in the file, in front of the rest (the file is only ever appended between rewrites).
    const inFile: ChatMessage[] = [];
    readLines(await readFile(this.pathFor(session.key)), inFile);
    return inFile.slice(0, session.forgotten);
  }

  invalidate(key: string): void {
    this.forget(key);
    // The file may have been changed by someone else: the next append checks its last line again.
    this.writes.push(key, () => this.handles.close(key));
  }

  /** How many sessions the store itself holds in memory (tests); more live while in use elsewhere. */
  get heldSessions(): number {
    return this.recent.size;
  }

  /** Lets go of the copy in memory (and of a load under way: it is not remembered). */
  private forget(key: string): void {
    this.recent.delete(key);
    this.live.delete(key);
    this.loading.delete(key);
  }

  private remember(session: Session): void {
    this.live.set(session.key, new WeakRef(session));
    this.collected.register(session, session.key);
    this.recent.set(session.key, session);
  }

  /**
   * Adds messages to the session in memory (stamping a timestamp on those
   * without one) and appends them to its file. The caller must not push them
   * into session.messages itself.
   */
  /** `turn` is kept in the session's metadata in memory (written with its next metadata line). */
  append(session: Session, messages: ChatMessage[], turn?: SavedTurn): Promise<void> {
    if (messages.length === 0) return Promise.resolve();
    if (turn) session.metadata[SAVED_TURN] = turn;
    const now = new Date();
    const stamp = formatTimestamp(now);
    let text = "";
    for (const msg of messages) {
      msg.timestamp ??= stamp;
      session.messages.push(msg);
      text += JSON.stringify(msg) + "\n";
    }
    session.updatedAt = now;
    this.onAppended?.(session.key, messages);
    return this.writes.run(session.key, () => this.appendText(session, text));
  }

  /** Appends a metadata line with the session's current state (the last one wins when loading). */
  saveMetadata(session: Session): Promise<void> {
    session.updatedAt = new Date();
    const line = metadataLine(session);
    return this.writes.run(session.key, () => this.appendText(session, line, true));
  }

  /** Empties the session and atomically replaces its file with one metadata line. */
  clear(session: Session): Promise<void> {
    session.messages = [];
    session.lastConsolidated = 0;
    session.forgotten = 0;
    session.updatedAt = new Date();
    const line = metadataLine(session);
    return this.writes.run(session.key, async () => {
      await this.archive(session.key);
      await this.rewrite(session.key, [line]);
    });
  }

  /**
   * Atomically rewrites the file as one metadata line plus the messages
   * (folding the appended metadata lines into one). Explicit compaction only.
   */
  compact(session: Session): Promise<void> {
    if (session.forgotten > 0) {
      // Rewritten from memory, the file would lose the messages memory no longer holds.
      return Promise.reject(
        new PalaverError(
          `cannot compact session ${session.key}: ${session.forgotten} of its messages are only in its file`,
        ),
      );
    }
    const head = metadataLine(session);
    const messages = session.messages.slice();
    return this.writes.run(session.key, () => this.rewrite(session.key, batches(head, messages)));
  }

  /**
   * Deletes the session's file (one that is not there is fine), after the writes queued before,
   * and forgets the copy in memory once the file is gone, so no get() meanwhile keeps an old one.
   */
  remove(key: string): Promise<void> {
    const path = this.pathFor(key);
    return this.writes.run(key, async () => {
      try {
        // Closed first: the next append must open a new file, not write on into the deleted one.
        await this.handles.close(key);
        await unlink(path);
      } catch (err) {
        if (!isErrno(err, "ENOENT"))
          throw new PalaverError(`cannot delete session file ${path}: ${errorMessage(err)}`, { cause: err });
      } finally {
        this.forget(key);
      }
    });
  }

  /** Waits for every queued write (for shutdown and tests). */
  async flush(): Promise<void> {
    await this.writes.idle();
  }

  /** Shutdown: waits for the queued writes, then closes every file held open. */
  async close(): Promise<void> {
    await this.writes.idle();
    await this.handles.closeAll();
  }

  /** How many session files are held open for appending (tests). */
  get openFiles(): number {
    return this.handles.size;
  }

  /** Every session file, most recently updated first. */
  async list(): Promise<SessionFileInfo[]> {
    const names = await this.fileNames();
    const out: SessionFileInfo[] = [];
    for (let i = 0; i < names.length; i += LIST_CONCURRENCY) {
      const infos = await Promise.all(names.slice(i, i + LIST_CONCURRENCY).map((n) => this.info(n)));
      for (const info of infos) if (info) out.push(info);
    }
    return out.sort((a, b) => b.updatedAt.getTime() - a.updatedAt.getTime());
  }

  /**
   * Whether palaver has a session file for this chat: `<channel>:<chatId>`
   * itself or one of its threads (`<channel>:<chatId>:<thread>`). Only files
   * count, so a chat merely looked up in memory is not "known".
   */
  async hasChat(channel: string, chatId: string): Promise<boolean> {
    const key = `${channel}:${chatId}`;
    if (await isFile(this.pathFor(key))) return true;
    // Thread sessions: the file name is only a hint ('_' is ambiguous); the key on the first line decides.
    const prefix = `${safeKey(key)}_`;
    const candidates = (await this.fileNames()).filter((n) => n.startsWith(prefix));
    for (const name of candidates) {
      const found = await firstLineKey(join(this.sessionsDir, name)).catch(() => undefined);
      if (found?.startsWith(`${key}:`)) return true;
    }
    return false;
  }

  async count(): Promise<number> {
    return (await this.fileNames()).length;
  }

  // ---- internals ----

  private ensureDir(): Promise<void> {
    // 0700: sessions hold whole conversations (mode applies to folders this creates).
    this.dirReady ??= mkdirPrivate(this.sessionsDir).then(
      () => undefined,
      (err: unknown) => {
        this.dirReady = undefined;
        throw err;
      },
    );
    return this.dirReady;
  }

  private async openForAppend(path: string): Promise<FileHandle> {
    await this.ensureDir();
    try {
      return await open(path, "a+", FILE_MODE);
    } catch (err) {
      if (!isErrno(err, "ENOENT")) throw err;
      // The folder was removed while we ran: make it again, once.
      this.dirReady = undefined;
      await this.ensureDir();
      return await open(path, "a+", FILE_MODE);
    }
  }

  /**
   * One append of `text`, costing the same whatever the file's size. To a file held open since
   * our last append (its last line is ours, so whole): a stat of the path (still the same file?)
   * and one write. Otherwise it is opened: an fstat, at most a one-byte read, one write; a new
   * file gets the metadata line first, a file whose last line was cut short gets a newline so
   * our line stays whole; then it is held open.
   */
  private async appendText(session: Session, text: string, isMetadata = false): Promise<void> {
    const key = session.key;
    const path = this.pathFor(key);
    try {
      const held = await this.handles.get(key, path);
      if (held) {
        try {
          appendAll(held, text);
        } catch (err) {
          await this.handles.close(key); // the next append opens the file afresh
          throw err;
        }
        return;
      }
      const fh = await this.openForAppend(path);
      let kept = false;
      try {
        const { size } = await fh.stat();
        let prefix = "";
        if (size === 0) {
          if (!isMetadata) prefix = metadataLine(session);
        } else {
          const last = Buffer.alloc(1);
          await fh.read(last, 0, 1, size - 1);
          if (last[0] !== 0x0a) prefix = "\n";
        }
        appendAll(fh, prefix + text);
        await this.handles.keep(key, path, fh);
        kept = true;
      } finally {
        if (!kept) await fh.close();
      }
    } catch (err) {
      throw writeFailure("the session file", path, err);
    }
  }

  /** Moves the session's file into the archive folder, if there is one (a file that is not there is fine). */
  private async archive(key: string): Promise<void> {
    if (!this.archiveDir) return;
    const path = this.pathFor(key);
    await this.handles.close(key);
    await mkdirPrivate(this.archiveDir);
    const target = join(this.archiveDir, `${safeKey(key)}.${Date.now()}.jsonl`);
    try {
      await rename(path, target);
    } catch (err) {
      if (!isErrno(err, "ENOENT"))
        throw new PalaverError(`cannot archive session file ${path}: ${errorMessage(err)}`, { cause: err });
    }
  }

  private async rewrite(key: string, chunks: Iterable<string>): Promise<void> {
    const path = this.pathFor(key);
    // The file is replaced (temp + rename): the handle held on the old one must not be written to.
    await this.handles.close(key);
    await this.ensureDir();
    try {
      await replaceFilePrivate(path, chunks);
    } catch (err) {
      throw writeFailure("the session file", path, err);
    }
  }

  private async load(key: string): Promise<Session> {
    const path = this.pathFor(key);
    let data: Buffer;
    try {
      // One read, decoded a chunk of whole lines at a time (readLines in file-lines.ts).
      data = await readWholeFile(path);
    } catch (err) {
      if (isErrno(err, "ENOENT")) return new Session(key);
      throw new PalaverError(`cannot read session file ${path}: ${errorMessage(err)}`, { cause: err });
    }
    const session = new Session(key);
    const { metadata, bad } = readLines(data, session.messages);
    let updatedAt: Date | undefined;
    for (const line of metadata) updatedAt = applyMetadata(session, line) ?? updatedAt;
    for (const { lineNo, problem } of bad.slice(0, MAX_LINE_WARNINGS))
      this.log.warn({ file: path, line: lineNo }, `skipping session line: ${problem}`);
    if (bad.length > 0) {
      const keptIn = corruptPathOf(path);
      keepCorrupt(
        keptIn,
        bad.map((b) => b.line),
        this.log,
      );
      this.log.warn(
        { file: path, skipped: bad.length, keptIn },
        `skipped ${bad.length} bad line(s) in the session file; they are kept in ${keptIn}`,
      );
    }
    session.lastConsolidated = Math.min(session.lastConsolidated, session.messages.length);
    // Messages are appended after the last metadata line, so the newest one may be later.
    const lastStamp = parseTimestamp(session.messages.at(-1)?.timestamp);
    const newest = [updatedAt, lastStamp].filter((d): d is Date => d !== undefined);
    if (newest.length > 0) session.updatedAt = new Date(Math.max(...newest.map((d) => d.getTime())));
    return session;
  }

  private async fileNames(): Promise<string[]> {
    try {
      return (await readdir(this.sessionsDir)).filter((n) => n.endsWith(".jsonl"));
    } catch (err) {
      if (isErrno(err, "ENOENT")) return [];
      throw new PalaverError(`cannot list ${this.sessionsDir}: ${errorMessage(err)}`, { cause: err });
    }
  }

  private async info(name: string): Promise<SessionFileInfo | undefined> {
    const path = join(this.sessionsDir, name);
    try {
      const st = await stat(path);
      if (!st.isFile()) return undefined;
      // nanobot's fallback: the first '_' of the file name was the ':' of the key.
      const key = (await firstLineKey(path)) ?? name.slice(0, -".jsonl".length).replace("_", ":");
      return { key, path, updatedAt: st.mtime };
    } catch {
      return undefined; // removed while listing
    }
  }
}

/** Applies one metadata line (the last one wins); returns its updated_at. */
function applyMetadata(session: Session, data: MetadataLine): Date | undefined {
  const created = parseTimestamp(data.created_at);
  if (created) session.createdAt = created;
  if (data.metadata) session.metadata = data.metadata;
  if (data.last_consolidated != null) session.lastConsolidated = data.last_consolidated;
  return parseTimestamp(data.updated_at);
}

function* batches(head: string, messages: readonly ChatMessage[]): Generator<string> {
  yield head;
  for (let i = 0; i < messages.length; i += REWRITE_BATCH) {
    let text = "";
    for (const msg of messages.slice(i, i + REWRITE_BATCH)) text += JSON.stringify(msg) + "\n";
    yield text;
  }
}

/**
 * The file's bytes in one read of the size fstat gives (what readFile does, less its 512 KiB
 * reads and their copy into one buffer, which a long session pays on every load).
 */
async function readWholeFile(path: string): Promise<Buffer> {
  const fh = await open(path, "r");
  try {
    const { size } = await fh.stat();
    const data = Buffer.allocUnsafe(size);
    let length = 0;
    while (length < size) {
      const { bytesRead } = await fh.read(data, length, size - length, length);
      if (bytesRead === 0) break; // the file shrank while we read
      length += bytesRead;
    }
    return data.subarray(0, length);
  } finally {
    await fh.close();
  }
}

async function firstLineKey(path: string): Promise<string | undefined> {
  const fh = await open(path, "r");
  try {
    const buf = Buffer.alloc(FIRST_LINE_BYTES);
    const { bytesRead } = await fh.read(buf, 0, FIRST_LINE_BYTES, 0);
    const text = buf.subarray(0, bytesRead).toString("utf8");
    const nl = text.indexOf("\n");
    const data: unknown = JSON.parse(nl >= 0 ? text.slice(0, nl) : text);
    return isObject(data) && data._type === "metadata" && typeof data.key === "string" ? data.key : undefined;
  } catch {
    return undefined;
  } finally {
    await fh.close();
  }
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

/**
 * All of `text` written at the end of a file opened for appending, synchronously, as the journal
 * writes: into the page cache, where an asynchronous write costs main-thread CPU per append in a
 * thread-pool round trip at 100 chats at once (bench/throughput.ts). writeSync may write part.
 */
function appendAll(fh: FileHandle, text: string): void {
  const data = Buffer.from(text, "utf8");
  for (let done = 0; done < data.length;) done += writeSync(fh.fd, data, done);
}
