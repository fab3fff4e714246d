/**
 * The search index: one SQLite file in the state folder with every indexed piece (`docs`) and two
 * FTS5 indexes over it. `fts` uses unicode61 with diacritics removed (café = cafe, Müller = muller),
 * which covers every script that separates words with spaces. Chinese, Japanese and Korean do not,
 * so unicode61 would keep a whole sentence as one token: pieces with such characters are also put
 * in `fts_cjk`, a trigram index, which matches any run of three or more characters; shorter runs
 * are looked up with LIKE. Only those pieces, so the trigram index (about three times the text)
 * costs nothing for a workspace that never writes CJK.
 */
import { createHash } from "node:crypto";
import { rename } from "node:fs/promises";
import { dirname } from "node:path";
import { mkdirPrivate } from "../util/private-fs.js";
import type { Logger } from "../log.js";
import { errorMessage } from "../util/errors.js";
import { cjkTerms, ftsQuery, hasCjk } from "./chunks.js";
import type { Database, SqlValue, loadSqlite } from "./sqlite.js";
import { closestTo, fromBlob, MIN_COSINE, toBlob } from "./vectors.js";

type Sqlite = Extract<ReturnType<typeof loadSqlite>, { sqlite: unknown }>["sqlite"];

export type DocSource = "memory" | "history" | "session";

export interface NewDoc {
  source: DocSource;
  /** The session key; "MEMORY.md" or "HISTORY.md" for the memory files. */
  key: string;
  role?: string;
  /** When it was said (sessions) or the entry's date (HISTORY.md). */
  at?: string;
  /** The section heading or entry stamp. */
  label?: string;
  text: string;
}

export interface Doc extends NewDoc {
  id: number;
}

export interface Hit extends Doc {
  excerpt: string;
}

export interface SearchFilter {
  source?: DocSource;
  /** Only these sessions' messages (scope "chat"); the memory files always count. Absent: every session. */
  sessionKeys?: readonly string[];
  limit: number;
}

/** Bumped when the tables change: an index of another version is rebuilt. */
const SCHEMA_VERSION = "1";

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v TEXT);
CREATE TABLE IF NOT EXISTS docs(
  id INTEGER PRIMARY KEY, hash TEXT UNIQUE NOT NULL, source TEXT NOT NULL, key TEXT NOT NULL,
  role TEXT, at TEXT, label TEXT, text TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS docs_key ON docs(key, id);
CREATE INDEX IF NOT EXISTS docs_source ON docs(source);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(text, content='docs', content_rowid='id',
  tokenize='unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE IF NOT EXISTS fts_cjk USING fts5(text, content='docs', content_rowid='id',
  tokenize='trigram');
CREATE TABLE IF NOT EXISTS files(path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime REAL NOT NULL);
CREATE TABLE IF NOT EXISTS vecs(id INTEGER PRIMARY KEY, model TEXT NOT NULL, v BLOB NOT NULL);
`;

/** Characters of a hit shown around the words that matched. */
const EXCERPT_TOKENS = 40;

export class RecallIndex {
  private constructor(
    private readonly db: Database,
    readonly path: string,
  ) {}

  /**
   * Opens the index, or makes a new one when it is missing, unreadable, fails SQLite's quick check
   * or is of another schema version: the damaged file is moved aside (kept for a look, never
   * deleted) and `fresh` says everything must be indexed again.
   */
  static async open(
    sqlite: Sqlite,
    path: string,
    log: Logger,
  ): Promise<{ index: RecallIndex; fresh: boolean }> {
    await mkdirPrivate(dirname(path));
    try {
      const db = new sqlite.DatabaseSync(path);
      try {
        const check = db.prepare("PRAGMA quick_check").get();
        if (check?.quick_check !== "ok") throw new Error(`quick_check: ${String(check?.quick_check)}`);
        const version = hasTable(db, "meta")
          ? db.prepare("SELECT v FROM meta WHERE k = 'schema'").get()?.v
          : undefined;
        const fresh = version === undefined && !hasTable(db, "docs");
        if (version !== SCHEMA_VERSION && !fresh) throw new Error(`schema version ${String(version)}`);
        return { index: RecallIndex.setUp(db, path), fresh };
      } catch (err) {
        db.close();
        throw err;
      }
    } catch (err) {
      const aside = `${path}.damaged-${Date.now()}`;
      log.warn(
        { index: path, keptIn: aside, reason: errorMessage(err) },
        "memory search index is damaged or outdated; it is moved aside and rebuilt from the files",
      );
      await moveAside(path, aside);
      return { index: RecallIndex.setUp(new sqlite.DatabaseSync(path), path), fresh: true };
    }
  }

  private static setUp(db: Database, path: string): RecallIndex {
    // WAL: `palaver memory search` can read while the gateway writes.
    db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 2000;");
    db.exec(SCHEMA);
    db.prepare("INSERT OR REPLACE INTO meta(k, v) VALUES ('schema', ?)").run(SCHEMA_VERSION);
    return new RecallIndex(db, path);
  }

  /** Adds pieces, skipping those already indexed (same source, key, time, role and text); returns how many were new. */
  add(docs: readonly NewDoc[]): number {
    if (docs.length === 0) return 0;
    const insert = this.db.prepare(
      "INSERT OR IGNORE INTO docs(hash, source, key, role, at, label, text) VALUES (?, ?, ?, ?, ?, ?, ?)",
    );
    const fts = this.db.prepare("INSERT INTO fts(rowid, text) VALUES (?, ?)");
    const cjk = this.db.prepare("INSERT INTO fts_cjk(rowid, text) VALUES (?, ?)");
    let added = 0;
    this.transaction(() => {
      for (const doc of docs) {
        const result = insert.run(
          hashOf(doc),
          doc.source,
          doc.key,
          doc.role ?? null,
          doc.at ?? null,
          doc.label ?? null,
          doc.text,
        );
        if (Number(result.changes) === 0) continue;
        const id = BigInt(result.lastInsertRowid);
        fts.run(id, doc.text);
        if (hasCjk(doc.text)) cjk.run(id, doc.text);
        added++;
      }
      this.touch();
    });
    return added;
  }

  /** Makes a memory file's pieces exactly `docs`: pieces no longer in the file are removed. */
  replaceSource(source: DocSource, docs: readonly NewDoc[]): void {
    const keep = new Set(docs.map(hashOf));
    const rows = this.db.prepare("SELECT id, hash, text FROM docs WHERE source = ?").all(source);
    this.transaction(() => {
      for (const row of rows) if (!keep.has(String(row.hash))) this.remove(Number(row.id), String(row.text));
    });
    this.add(docs);
  }

  /** Full-text hits, and when `byMeaning` is given (a query's vector), the nearest vectors' too, fused by rank. */
  search(
    query: string,
    filter: SearchFilter,
    byMeaning?: { model: string; vector: readonly number[] },
  ): Hit[] {
    const { extra, params } = whereOf(filter);
    const lists: Hit[][] = [];
    const words = ftsQuery(query);
    if (words) lists.push(this.match("fts", words, extra, params, filter.limit));
    if (hasCjk(query)) {
      const { trigram, short } = cjkTerms(query);
      if (trigram) lists.push(this.match("fts_cjk", trigram, extra, params, filter.limit));
      for (const term of short) lists.push(this.like(term, extra, params, filter.limit));
    }
    if (byMeaning) lists.push(this.nearest(byMeaning.model, byMeaning.vector, extra, params, filter.limit));
    return fuseByRank(
      lists.filter((l) => l.length > 0),
      filter.limit,
    );
  }

  // ---- vectors: one per piece, of one model (a model change drops them all) ----

  /** Forgets the vectors of any other model; returns how many. */
  dropVectorsNotOf(model: string): number {
    return Number(this.db.prepare("DELETE FROM vecs WHERE model <> ?").run(model).changes);
  }

  /** Up to `n` pieces after `afterId` that have no vector yet, oldest first. */
  unembedded(afterId: number, n: number): { id: number; text: string }[] {
    return this.db
      .prepare(
        "SELECT d.id, d.text FROM docs d LEFT JOIN vecs v ON v.id = d.id " +
          "WHERE v.id IS NULL AND d.id > ? ORDER BY d.id LIMIT ?",
      )
      .all(afterId, n)
      .map((row) => ({ id: Number(row.id), text: String(row.text) }));
  }

  /** Stores vectors; a piece removed meanwhile (MEMORY.md rewritten) gets none. */
  putVectors(model: string, rows: readonly { id: number; vector: readonly number[] }[]): void {
    const put = this.db.prepare(
      "INSERT OR REPLACE INTO vecs(id, model, v) SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM docs WHERE id = ?)",
    );
    this.transaction(() => {
      for (const { id, vector } of rows) put.run(id, model, toBlob(vector), id);
    });
  }

  vectorCount(model: string): number {
    return Number(this.db.prepare("SELECT COUNT(*) AS n FROM vecs WHERE model = ?").get(model)?.n ?? 0);
  }

  getMeta(key: string): string | undefined {
    const v = this.db.prepare("SELECT v FROM meta WHERE k = ?").get(key)?.v;
    return typeof v === "string" ? v : undefined;
  }

  setMeta(key: string, value: string | undefined): void {
    if (value === undefined) this.db.prepare("DELETE FROM meta WHERE k = ?").run(key);
    else this.db.prepare("INSERT OR REPLACE INTO meta(k, v) VALUES (?, ?)").run(key, value);
  }

  get(id: number): Doc | undefined {
    const row = this.db.prepare("SELECT * FROM docs WHERE id = ?").get(id);
    return row ? docOf(row) : undefined;
  }

  /** Up to `n` messages of the same session before and after `doc`, in order, with it. */
  around(doc: Doc, n: number): Doc[] {
    const before = this.db
      .prepare("SELECT * FROM docs WHERE key = ? AND source = 'session' AND id < ? ORDER BY id DESC LIMIT ?")
      .all(doc.key, doc.id, n)
      .reverse();
    const after = this.db
      .prepare("SELECT * FROM docs WHERE key = ? AND source = 'session' AND id > ? ORDER BY id LIMIT ?")
      .all(doc.key, doc.id, n);
    return [...before.map(docOf), doc, ...after.map(docOf)];
  }

  /** The size and mtime a file had when it was last indexed. */
  fileStamp(path: string): { size: number; mtime: number } | undefined {
    const row = this.db.prepare("SELECT size, mtime FROM files WHERE path = ?").get(path);
    return row ? { size: Number(row.size), mtime: Number(row.mtime) } : undefined;
  }

  setFileStamp(path: string, size: number, mtime: number): void {
    this.db
      .prepare("INSERT OR REPLACE INTO files(path, size, mtime) VALUES (?, ?, ?)")
      .run(path, size, mtime);
  }

  counts(): Record<DocSource, number> & { updatedAt: string | undefined } {
    const out = { memory: 0, history: 0, session: 0, updatedAt: undefined as string | undefined };
    for (const row of this.db.prepare("SELECT source, COUNT(*) AS n FROM docs GROUP BY source").all())
      out[row.source as DocSource] = Number(row.n);
    const updated = this.db.prepare("SELECT v FROM meta WHERE k = 'updated'").get()?.v;
    out.updatedAt = typeof updated === "string" ? updated : undefined;
    return out;
  }

  /** Forgets everything (reindex): the files are read again. */
  clear(): void {
    this.transaction(() => {
      this.db.exec(
        "DELETE FROM docs; DELETE FROM files; DELETE FROM vecs; " +
          "INSERT INTO fts(fts) VALUES ('delete-all'); INSERT INTO fts_cjk(fts_cjk) VALUES ('delete-all');",
      );
    });
  }

  close(): void {
    this.db.close();
  }

  /** Ranked first, excerpts after: snippet() for the few hits shown, not for every row that matched. */
  private match(
    table: "fts" | "fts_cjk",
    expr: string,
    extra: string,
    params: SqlValue[],
    limit: number,
  ): Hit[] {
    const rows = this.db
      .prepare(
        `SELECT d.* FROM ${table} JOIN docs d ON d.id = ${table}.rowid ` +
          `WHERE ${table} MATCH ?${extra} ORDER BY bm25(${table}) LIMIT ?`,
      )
      .all(expr, ...params, limit);
    const excerpt = this.db.prepare(
      `SELECT snippet(${table}, 0, '', '', ' … ', ${EXCERPT_TOKENS}) AS excerpt ` +
        `FROM ${table} WHERE ${table} MATCH ? AND rowid = ?`,
    );
    // A BigInt: FTS5 ignores a rowid constraint given as a JS number (bound as a REAL).
    return rows.map((row) => hitOf({ ...row, excerpt: excerpt.get(expr, BigInt(Number(row.id)))?.excerpt }));
  }

  /**
   * The pieces whose vectors are closest to `query` (cosine, at least MIN_COSINE), in scope. A scan
   * row by row: nothing but the best few is held in memory, and under scope "chat" only the
   * conversation's own messages are read.
   */
  private nearest(
    model: string,
    query: readonly number[],
    extra: string,
    params: SqlValue[],
    limit: number,
  ): Hit[] {
    const rows = this.db
      .prepare(`SELECT v.id, v.v FROM vecs v JOIN docs d ON d.id = v.id WHERE v.model = ?${extra}`)
      .iterate(model, ...params);
    const best = closestTo(
      toBlobVector(query),
      (function* () {
        for (const row of rows) yield { id: Number(row.id), vector: fromBlob(row.v as Uint8Array) };
      })(),
      limit,
      MIN_COSINE,
    );
    const get = this.db.prepare("SELECT d.*, substr(d.text, 1, 300) AS excerpt FROM docs d WHERE d.id = ?");
    return best.flatMap(({ id }) => {
      const row = get.get(id);
      return row ? [hitOf(row)] : [];
    });
  }

  /** CJK words of one or two characters: no trigram to match, so a scan of the CJK pieces. */
  private like(term: string, extra: string, params: SqlValue[], limit: number): Hit[] {
    return this.db
      .prepare(
        `SELECT d.*, substr(d.text, 1, 200) AS excerpt FROM fts_cjk JOIN docs d ON d.id = fts_cjk.rowid ` +
          `WHERE fts_cjk.text LIKE ?${extra} ORDER BY d.id DESC LIMIT ?`,
      )
      .all(`%${term}%`, ...params, limit)
      .map(hitOf);
  }

  private remove(id: number, text: string): void {
    const rowid = BigInt(id);
    this.db.prepare("INSERT INTO fts(fts, rowid, text) VALUES ('delete', ?, ?)").run(rowid, text);
    if (hasCjk(text))
      this.db.prepare("INSERT INTO fts_cjk(fts_cjk, rowid, text) VALUES ('delete', ?, ?)").run(rowid, text);
    this.db.prepare("DELETE FROM docs WHERE id = ?").run(id);
    this.db.prepare("DELETE FROM vecs WHERE id = ?").run(id);
  }

  private touch(): void {
    this.db.prepare("INSERT OR REPLACE INTO meta(k, v) VALUES ('updated', ?)").run(new Date().toISOString());
  }

  private transaction(work: () => void): void {
    this.db.exec("BEGIN");
    try {
      work();
      this.db.exec("COMMIT");
    } catch (err) {
      this.db.exec("ROLLBACK");
      throw err;
    }
  }
}

/**
 * Reciprocal-rank fusion: lists ranked by different measures (BM25 over words, trigrams, a scan)
 * merged by position, which needs no common scale. k = 60 as in the paper (Cormack et al., 2009).
 */
export function fuseByRank<T extends { id: number }>(lists: readonly T[][], limit: number): T[] {
  if (lists.length === 1) return lists[0]!.slice(0, limit);
  const scores = new Map<number, { item: T; score: number }>();
  for (const list of lists)
    list.forEach((item, rank) => {
      const entry = scores.get(item.id) ?? { item, score: 0 };
      entry.score += 1 / (60 + rank + 1);
      scores.set(item.id, entry);
    });
  return [...scores.values()]
    .sort((a, b) => b.score - a.score)
    .slice(0, limit)
    .map((e) => e.item);
}

/** A query's vector in the stored form (normalised Float32), so both sides are compared alike. */
function toBlobVector(vector: readonly number[]): Float32Array {
  return fromBlob(toBlob(vector));
}

/** The filter as SQL over `docs d`. */
function whereOf(filter: SearchFilter): { extra: string; params: SqlValue[] } {
  const where: string[] = [];
  const params: SqlValue[] = [];
  if (filter.source) {
    where.push("d.source = ?");
    params.push(filter.source);
  }
  if (filter.sessionKeys) {
    where.push(
      `(d.source <> 'session' OR d.key IN (${filter.sessionKeys.map(() => "?").join(", ") || "NULL"}))`,
    );
    params.push(...filter.sessionKeys);
  }
  return { extra: where.map((w) => ` AND ${w}`).join(""), params };
}

function hashOf(doc: NewDoc): string {
  return createHash("sha1")
    .update(`${doc.source}\u0000${doc.key}\u0000${doc.at ?? ""}\u0000${doc.role ?? ""}\u0000${doc.text}`)
    .digest("base64url");
}

function hasTable(db: Database, name: string): boolean {
  return (
    db.prepare("SELECT 1 AS x FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== undefined
  );
}

function docOf(row: Record<string, unknown>): Doc {
  const opt = (v: unknown) => (typeof v === "string" ? v : undefined);
  return {
    id: Number(row.id),
    source: row.source as DocSource,
    key: String(row.key),
    ...(opt(row.role) ? { role: opt(row.role) } : {}),
    ...(opt(row.at) ? { at: opt(row.at) } : {}),
    ...(opt(row.label) ? { label: opt(row.label) } : {}),
    text: String(row.text),
  };
}

function hitOf(row: Record<string, unknown>): Hit {
  return { ...docOf(row), excerpt: typeof row.excerpt === "string" ? row.excerpt : "" };
}

async function moveAside(path: string, aside: string): Promise<void> {
  for (const suffix of ["", "-wal", "-shm"])
    await rename(path + suffix, aside + suffix).catch(() => undefined); // absent: nothing to keep
}
