/**
 * Memory search: keeps the index (index-db.ts) in step with the workspace and answers queries.
 *
 * - At start the index is opened (or rebuilt when missing or damaged) and every session file that
 *   changed since it was last read is indexed, in the background: the gateway does not wait, a
 *   search does. Sessions ended by /new are kept by the session store in `sessions/archive/`, so a
 *   rebuild finds them too.
 * - Each append to a session is handed over by the store (`enqueue`) and indexed on a later turn
 *   of the event loop, so a reply never waits for it.
 * - MEMORY.md and HISTORY.md are stat'ed before each search and after each turn's append: a
 *   change, a hand edit included, is indexed then, and a new MEMORY.md is kept as a version.
 * - With memory.search.embeddings, pieces also get vectors in the background (embedding.ts) and a
 *   search fuses the nearest vectors with the full-text hits; without them, or while the endpoint
 *   fails, full text alone.
 */
import { existsSync, statSync } from "node:fs";
import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import type { Embedder } from "../llm/embeddings.js";
import type { ChatMessage } from "../llm/types.js";
import type { Logger } from "../log.js";
import { readLines } from "../sessions/file-lines.js";
import type { SessionInfo } from "../sessions/storage.js";
import { errorMessage } from "../util/errors.js";
import { isIndexed, historyEntries, memorySections, messageText } from "./chunks.js";
import { Embeddings, type EmbeddingsState } from "./embedding.js";
import { RecallIndex, type Doc, type DocSource, type Hit, type NewDoc } from "./index-db.js";
import { loadSqlite } from "./sqlite.js";
import type { IndexSummary } from "./summary.js";
import type { MemoryVersions, VersionReason } from "./versions.js";

export interface RecallOptions {
  /** The index file (`<state>/memory/index.sqlite`). */
  indexPath: string;
  /** Session files, and those ended by /new; undefined when sessions are not files (cluster mode). */
  sessionsDir: string | undefined;
  archiveDir: string | undefined;
  memoryFile: string;
  historyFile: string;
  includeToolResults: boolean;
  /** Sessions kept in the cluster database: indexed at start beside the files, and caught up with before a search (cluster mode). */
  storedSessions?: StoredSessions;
  /** The least time between two catch-ups with the stored sessions (default 5 s). */
  storedCheckMs?: number;
  /** Where a changed MEMORY.md is kept as a version. */
  versions?: MemoryVersions;
  /** memory.search.embeddings: rank by meaning too. Absent: full text only. */
  embedder?: Embedder;
  log: Logger;
}

/** What the index reads of sessions not kept as files (sessions/pg-store.ts). */
export interface StoredSessions {
  list(): Promise<SessionInfo[]>;
  /** The session's messages from position `from` on, and how many it holds now. */
  messagesFrom(key: string, from: number): Promise<{ messages: ChatMessage[]; count: number }>;
}

export interface RecallQuery {
  query: string;
  limit: number;
  source?: DocSource;
  /** Scope "chat": only these sessions' messages. Absent: every session. */
  sessionKeys?: readonly string[];
}

export interface RecallStatus {
  indexPath: string;
  documents: { memory: number; history: number; session: number };
  updatedAt: string | undefined;
  bytesOnDisk: number;
  embeddings: EmbeddingsState;
}

/** A message longer than this is indexed by its beginning (a pasted log must not bloat the index). */
const MAX_INDEXED_CHARS = 20_000;
/** Session files between two progress lines of a first build. */
const PROGRESS_EVERY = 500;
/** After appends, how often MEMORY.md and HISTORY.md are looked at for changes (a search always looks). */
const MEMORY_CHECK_MS = 2_000;
/** Cluster mode: how often a search first reads the sessions other instances changed. */
const STORED_CHECK_MS = 5_000;

export class MemoryRecall {
  private index: RecallIndex | undefined;
  private readonly pending: { key: string; messages: readonly ChatMessage[] }[] = [];
  private flushScheduled = false;
  /** Memory file checks run one at a time. */
  private memorySync: Promise<void> = Promise.resolve();
  private memoryCheckedAt = -Infinity;
  private storedCheckedAt = -Infinity;
  private started: Promise<void> | undefined;
  private readonly embeddings: Embeddings | undefined;

  private constructor(
    private readonly sqlite: Extract<ReturnType<typeof loadSqlite>, { sqlite: unknown }>["sqlite"],
    private readonly opts: RecallOptions,
  ) {
    this.embeddings = opts.embedder ? new Embeddings(opts.embedder, () => this.index, opts.log) : undefined;
  }

  /** The service, or why this Node cannot have it (logged once by the caller). */
  static create(opts: RecallOptions): MemoryRecall | { missing: string } {
    const loaded = loadSqlite();
    return "missing" in loaded ? loaded : new MemoryRecall(loaded.sqlite, opts);
  }

  /** Opens the index and catches up with the files; idempotent, and every query waits for it. */
  start(): Promise<void> {
    this.started ??= this.open();
    return this.started;
  }

  /** Hands over a session append (SessionStore.onAppended): indexed on a later turn of the event loop. */
  enqueue(key: string, messages: readonly ChatMessage[]): void {
    this.pending.push({ key, messages });
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      if (!this.index) return; // start() flushes what came before it
      this.flush();
      // A turn that wrote MEMORY.md (a tool, by hand meanwhile): indexed and kept as a version now;
      // looked at once per MEMORY_CHECK_MS at most, so a busy bot stats no files per message.
      const now = performance.now();
      if (now - this.memoryCheckedAt >= MEMORY_CHECK_MS) {
        this.memoryCheckedAt = now;
        void this.syncMemoryFiles("edit");
      }
    });
  }

  async search(q: RecallQuery): Promise<Hit[]> {
    const index = await this.ready();
    await this.syncMemoryFiles("edit");
    await this.catchUpStoredSessions(index);
    const vector = await this.embeddings?.queryVector(q.query);
    return index.search(
      q.query,
      {
        limit: q.limit,
        ...(q.source ? { source: q.source } : {}),
        ...(q.sessionKeys ? { sessionKeys: q.sessionKeys } : {}),
      },
      vector && this.embeddings ? { model: this.embeddings.model, vector } : undefined,
    );
  }

  /** A piece and, for a message, `around` messages either side; undefined when absent or out of scope. */
  async get(id: number, around: number, sessionKeys?: readonly string[]): Promise<Doc[] | undefined> {
    const index = await this.ready();
    const doc = index.get(id);
    if (!doc) return undefined;
    if (doc.source === "session" && sessionKeys && !sessionKeys.includes(doc.key)) return undefined;
    return doc.source === "session" ? index.around(doc, around) : [doc];
  }

  async status(): Promise<RecallStatus> {
    const index = await this.ready();
    const { updatedAt, ...documents } = index.counts();
    let bytesOnDisk = 0;
    for (const suffix of ["", "-wal"])
      bytesOnDisk += await stat(this.opts.indexPath + suffix).then(
        (s) => s.size,
        () => 0,
      );
    return {
      indexPath: this.opts.indexPath,
      documents,
      updatedAt,
      bytesOnDisk,
      embeddings: this.embeddings?.state(index) ?? { state: "off" },
    };
  }

  /** The index now, for /status (synchronous); undefined while it opens. */
  summary(): IndexSummary | undefined {
    if (!this.index) return undefined;
    const { updatedAt, memory, history, session } = this.index.counts();
    let bytesOnDisk = 0;
    for (const suffix of ["", "-wal"]) {
      const path = this.opts.indexPath + suffix;
      bytesOnDisk += existsSync(path) ? statSync(path).size : 0;
    }
    return {
      pieces: memory + history + session,
      bytesOnDisk,
      updatedAt,
      embeddings: this.embeddings?.state(this.index) ?? { state: "off" },
    };
  }

  /** Forgets everything and indexes the files again (`palaver memory reindex`). */
  async reindex(): Promise<void> {
    const index = await this.ready();
    index.clear();
    this.embeddings?.opened(index);
    await this.syncMemoryFiles("edit");
    await this.memorySync;
    await this.indexSessionFiles(index);
    await this.indexStoredSessions(index);
  }

  /** Indexes what is queued and closes the file. */
  async close(): Promise<void> {
    if (!this.started) return;
    await this.started.catch(() => undefined);
    await this.memorySync;
    this.flush();
    await this.embeddings?.close();
    this.index?.close();
    this.index = undefined;
    this.started = undefined;
  }

  // ---- internals ----

  private async ready(): Promise<RecallIndex> {
    await this.start();
    if (!this.index) throw new Error("the memory search index is closed");
    this.flush();
    return this.index;
  }

  private async open(): Promise<void> {
    const { index, fresh } = await RecallIndex.open(this.sqlite, this.opts.indexPath, this.opts.log);
    this.index = index;
    this.embeddings?.opened(index);
    if (fresh)
      this.opts.log.info(
        { index: this.opts.indexPath },
        "memory search: building the index from the workspace files",
      );
    await this.syncMemoryFiles("start");
    await this.indexSessionFiles(index);
    await this.indexStoredSessions(index);
    this.flush();
    this.embeddings?.fill();
  }

  private flush(): void {
    if (!this.index || this.pending.length === 0) return;
    const docs: NewDoc[] = [];
    for (const { key, messages } of this.pending.splice(0))
      for (const msg of messages) {
        const doc = this.sessionDoc(key, msg);
        if (doc) docs.push(doc);
      }
    try {
      if (this.index.add(docs) > 0) this.embeddings?.fill();
    } catch (err) {
      this.opts.log.warn(
        { err },
        "memory search: indexing new messages failed; `palaver memory reindex` catches up",
      );
    }
  }

  private sessionDoc(key: string, msg: ChatMessage): NewDoc | undefined {
    if (!isIndexed(msg, this.opts.includeToolResults)) return undefined;
    const text = messageText(msg).trim().slice(0, MAX_INDEXED_CHARS);
    if (text === "") return undefined;
    return { source: "session", key, role: msg.role, ...(msg.timestamp ? { at: msg.timestamp } : {}), text };
  }

  /** Queues a check of both memory files; the returned chain is awaited by search. */
  private syncMemoryFiles(reason: VersionReason): Promise<void> {
    this.memorySync = this.memorySync.then(async () => {
      try {
        await this.syncFile(this.opts.memoryFile, "memory", reason);
        await this.syncFile(this.opts.historyFile, "history", reason);
      } catch (err) {
        this.opts.log.warn({ err }, "memory search: reading the memory files failed");
      }
    });
    return this.memorySync;
  }

  private async syncFile(path: string, source: "memory" | "history", reason: VersionReason): Promise<void> {
    const index = this.index;
    if (!index) return;
    const st = await stat(path).catch(() => undefined);
    const size = st?.size ?? 0;
    const mtime = st?.mtimeMs ?? 0;
    const known = index.fileStamp(path);
    if (known && known.size === size && known.mtime === mtime) return;
    const text = st ? await readFile(path, "utf8") : "";
    const name = source === "memory" ? "MEMORY.md" : "HISTORY.md";
    const pieces = source === "memory" ? memorySections(text) : historyEntries(text);
    index.replaceSource(
      source,
      pieces.map((p) => ({
        source,
        key: name,
        label: p.label,
        ...(source === "history" && p.label !== "(undated)" ? { at: p.label } : {}),
        text: p.text,
      })),
    );
    index.setFileStamp(path, size, mtime);
    this.embeddings?.fill();
    if (source === "memory" && st && this.opts.versions) await this.opts.versions.keep(text, reason);
  }

  /**
   * Cluster mode: the turns other instances ran since the last look, before a search (this
   * instance's own arrive through enqueue()); at most once per storedCheckMs.
   */
  private async catchUpStoredSessions(index: RecallIndex): Promise<void> {
    if (!this.opts.storedSessions) return;
    const now = performance.now();
    if (now - this.storedCheckedAt < (this.opts.storedCheckMs ?? STORED_CHECK_MS)) return;
    this.storedCheckedAt = now;
    if ((await this.indexStoredSessions(index)) > 0) this.embeddings?.fill();
  }

  /**
   * The sessions in the cluster database that changed since the index last read them (each
   * instance has its own index). A session is stamped like a file, under `database:<key>`, by its
   * update time and the messages read, so only the messages after those are read again (all of
   * them when it was cleared since); a message read twice is indexed once.
   */
  private async indexStoredSessions(index: RecallIndex): Promise<number> {
    const sessions = this.opts.storedSessions;
    if (!sessions) return 0;
    let read = 0;
    let added = 0;
    try {
      for (const info of await sessions.list()) {
        const stamp = `database:${info.key}`;
        const seen = index.fileStamp(stamp);
        if (seen?.mtime === info.updatedAt.getTime()) continue;
        let from = seen?.size ?? 0;
        let found = await sessions.messagesFrom(info.key, from);
        if (found.count < from) found = await sessions.messagesFrom(info.key, (from = 0));
        added += index.add(
          found.messages.map((m) => this.sessionDoc(info.key, m)).filter((d) => d !== undefined),
        );
        index.setFileStamp(stamp, found.count, info.updatedAt.getTime());
        read++;
      }
    } catch (err) {
      this.opts.log.warn(
        { reason: errorMessage(err) },
        "memory search: sessions in the cluster database could not be indexed; `palaver memory reindex` tries again",
      );
    }
    if (added > 0)
      this.opts.log.info(
        { sessions: read, messages: added },
        `memory search: indexed ${added} messages from ${read} sessions in the cluster database`,
      );
    return added;
  }

  private async indexSessionFiles(index: RecallIndex): Promise<void> {
    const files = [...(await jsonlFiles(this.opts.sessionsDir)), ...(await jsonlFiles(this.opts.archiveDir))];
    const started = performance.now();
    let read = 0;
    let added = 0;
    for (const [i, path] of files.entries()) {
      if (i > 0 && i % PROGRESS_EVERY === 0)
        this.opts.log.info(
          { done: i, of: files.length },
          `memory search: indexing session files, ${i} of ${files.length}`,
        );
      try {
        const st = await stat(path);
        const known = index.fileStamp(path);
        if (known && known.size === st.size && known.mtime === st.mtimeMs) continue;
        const messages: ChatMessage[] = [];
        const { metadata } = readLines(await readFile(path), messages);
        const key = metadata.findLast((m) => m.key)?.key ?? keyFromName(path);
        added += index.add(messages.map((m) => this.sessionDoc(key, m)).filter((d) => d !== undefined));
        index.setFileStamp(path, st.size, st.mtimeMs);
        read++;
      } catch (err) {
        this.opts.log.warn(
          { file: path, reason: errorMessage(err) },
          "memory search: a session file could not be indexed",
        );
      }
    }
    if (read > 0)
      this.opts.log.info(
        { files: read, messages: added, ms: Math.round(performance.now() - started) },
        `memory search: indexed ${added} messages from ${read} session files`,
      );
  }
}

async function jsonlFiles(dir: string | undefined): Promise<string[]> {
  if (dir === undefined) return [];
  const names = await readdir(dir).catch(() => [] as string[]);
  return names.filter((n) => n.endsWith(".jsonl")).map((n) => join(dir, n));
}

/** nanobot's fallback when a file has no key on its metadata line: the first '_' was the ':'. */
function keyFromName(path: string): string {
  const name = path.slice(path.lastIndexOf("/") + 1).replace(/(\.\d+)?\.jsonl$/, "");
  return name.replace("_", ":");
}
