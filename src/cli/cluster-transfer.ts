/**
 * What `palaver cluster import` and `palaver cluster export` move between one process's files and
 * the cluster database (CLUSTER.md's data contracts): the workspace's sessions (nanobot's JSONL,
 * read and written by the file store's own code) and their archive, the cron jobs, and the small
 * state files (pairing, approval rules, open questions) as documents.
 *
 * Import looks at everything first and changes nothing when something already in the database
 * differs (unless forced), so a second import of the same files changes nothing and says so.
 */
import { readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import type { Database } from "../db/pool.js";
import { parseStore, serialize } from "../cron/store.js";
import { STORE_VERSION, type CronJob } from "../cron/types.js";
import type { Logger } from "../log.js";
import { PgSessionStore } from "../sessions/pg-store.js";
import { Session } from "../sessions/session.js";
import { metadataLine, safeKey, SessionStore } from "../sessions/store.js";
import { errorMessage, PalaverError } from "../util/errors.js";
import { mkdirPrivateSync, writeFilePrivateSync } from "../util/private-fs.js";

/** Where one process keeps what the cluster keeps in the database (import reads them, export writes them). */
export interface StateFiles {
  /** The workspace's sessions folder (its `archive/` holds the sessions /new ended). */
  sessionsDir: string;
  /** jobs.json (config/paths.ts cronStorePath). */
  cronPath: string;
  /** The state files kept as documents: palaver.documents name → the file. */
  documents: { name: string; path: string }[];
}

type Outcome = "imported" | "unchanged" | "replaced" | "conflict" | "skipped";

export interface ImportItem {
  /** "session telegram:42", "cron job abc", "document pairing.json". */
  what: string;
  outcome: Outcome;
  detail?: string;
}

/** One thing to store, with what it is now in the database. */
interface Planned extends ImportItem {
  store?: () => Promise<void>;
}

export interface ImportResult {
  /** False when something stored differs and force was not given: then nothing was written. */
  applied: boolean;
  items: ImportItem[];
}

/**
 * Imports the files into the database: what is new is stored, what is stored already is left
 * alone, what differs is a conflict: then nothing is written, unless `force` (then it is replaced).
 */
export async function importState(
  db: Database,
  files: StateFiles,
  opts: { force: boolean; log: Logger },
): Promise<ImportResult> {
  // One session in memory at a time, whatever the size of the workspace.
  const sessions = new PgSessionStore(db, opts.log, { maxCached: 1 });
  const planned = [
    ...(await planSessions(sessions, files.sessionsDir, opts.log)),
    ...(await planArchive(db, join(files.sessionsDir, "archive"), opts.log)),
    ...(await planCron(db, files.cronPath)),
    ...(await planDocuments(db, files.documents)),
  ];
  const applied = opts.force || !planned.some((p) => p.outcome === "conflict");
  if (applied) for (const item of planned) await item.store?.();
  await sessions.close();
  const items = planned.map(({ what, outcome, detail }): ImportItem => ({
    what,
    outcome: applied && outcome === "conflict" ? "replaced" : outcome,
    ...(detail !== undefined ? { detail } : {}),
  }));
  return { applied, items };
}

/** Pure: whether two sessions hold the same (what the database keeps of a session file). */
function sameSession(a: Session, b: Session): boolean {
  return (
    a.createdAt.getTime() === b.createdAt.getTime() &&
    a.updatedAt.getTime() === b.updatedAt.getTime() &&
    a.lastConsolidated === b.lastConsolidated &&
    JSON.stringify(a.metadata) === JSON.stringify(b.metadata) &&
    a.messages.length === b.messages.length &&
    a.messages.every((m, i) => JSON.stringify(m) === JSON.stringify(b.messages[i]))
  );
}

async function planSessions(sessions: PgSessionStore, dir: string, log: Logger): Promise<Planned[]> {
  // The file store's own reader: the session as the gateway would see it (bad lines kept aside).
  const files = new SessionStore(dir, log);
  const out: Planned[] = [];
  for (const info of await files.list()) {
    const what = `session ${info.key}`;
    if (files.pathFor(info.key) !== info.path) {
      out.push({
        what,
        outcome: "skipped",
        detail: `${info.path} is not named after its key (${basename(files.pathFor(info.key))})`,
      });
      continue;
    }
    const stored = await sessions.stored(info.key);
    const state =
      stored === undefined
        ? "new"
        : sameSession(stored, await readOnce(files, info.key))
          ? "same"
          : "differs";
    // Read again when it is stored, so only one session is in memory at a time (the gateways are stopped).
    // compact(): the session stored exactly as read, replacing what was there.
    out.push(plan(what, state, async () => sessions.compact(await readOnce(files, info.key))));
  }
  await files.close();
  return out;
}

/** The sessions /new ended: `archive/<safe key>.<ms>.jsonl`, one palaver.session_archive row each. */
async function planArchive(db: Database, dir: string, log: Logger): Promise<Planned[]> {
  const files = new SessionStore(dir, log);
  const out: Planned[] = [];
  for (const info of await files.list()) {
    const stem = basename(info.path, ".jsonl");
    const at = Number(/\.(\d+)$/.exec(stem)?.[1]);
    const what = `archived session ${info.key} of ${Number.isFinite(at) ? new Date(at).toISOString() : "?"}`;
    if (!Number.isFinite(at)) {
      out.push({ what, outcome: "skipped", detail: `${info.path} is not named <key>.<ms>.jsonl` });
      continue;
    }
    const found = await db.query<{ n: string }>(
      "SELECT count(*) AS n FROM palaver.session_archive WHERE session_key = $1 AND archived_at = $2",
      [info.key, new Date(at)],
    );
    if (Number(found.rows[0]?.n) > 0) {
      out.push({ what, outcome: "unchanged" });
      continue;
    }
    out.push({
      what,
      outcome: "imported",
      store: async () => {
        // Read through the file store under the file's own name; the key is the one on its first line.
        const session = await readOnce(files, stem);
        await db.query(
          `INSERT INTO palaver.session_archive
             (session_key, archived_at, created_at, updated_at, metadata, last_consolidated, messages)
           VALUES ($1, $2, $3, $4, $5::json, $6, $7::json)`,
          [
            info.key,
            new Date(at),
            session.createdAt,
            session.updatedAt,
            JSON.stringify(session.metadata),
            session.lastConsolidated,
            `[${session.messages.map((m) => JSON.stringify(m)).join(",")}]`,
          ],
        );
      },
    });
  }
  await files.close();
  return out;
}

/** A session file read without keeping it in the store's memory. */
async function readOnce(files: SessionStore, key: string): Promise<Session> {
  const session = await files.get(key);
  files.invalidate(key);
  return session;
}

async function planCron(db: Database, path: string): Promise<Planned[]> {
  const text = readIfThere(path);
  if (text === undefined) return [];
  const parsed = parseStore(text);
  if (!parsed.ok)
    throw new PalaverError(`cannot import ${path}: ${parsed.error}; fix or move the file, then import again`);
  const out: Planned[] = parsed.problems.map((p) => ({
    what: `cron job ${idOf(p.entry)}`,
    outcome: "skipped" as const,
    detail: `not a valid job in ${path} (${p.error}); it stays in the file`,
  }));
  for (const job of parsed.snapshot.jobs) {
    const found = await db.query<{ job: CronJob }>("SELECT job FROM palaver.cron_jobs WHERE id = $1", [
      job.id,
    ]);
    const stored = found.rows[0]?.job;
    const state =
      stored === undefined ? "new" : isDeepStrictEqual(stored, normalised(job)) ? "same" : "differs";
    out.push(
      plan(`cron job ${job.id}`, state, async () => {
        await db.query(
          `INSERT INTO palaver.cron_jobs (id, job) VALUES ($1, $2::jsonb)
           ON CONFLICT (id) DO UPDATE SET job = excluded.job, updated_at = now()`,
          [job.id, JSON.stringify(job)],
        );
      }),
    );
  }
  return out;
}

async function planDocuments(db: Database, documents: StateFiles["documents"]): Promise<Planned[]> {
  const out: Planned[] = [];
  for (const { name, path } of documents) {
    const text = readIfThere(path);
    if (text === undefined) continue;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      throw new PalaverError(
        `cannot import ${path}: not JSON (${errorMessage(err)}); fix or move the file, then import again`,
      );
    }
    const found = await db.query<{ value: unknown }>("SELECT value FROM palaver.documents WHERE name = $1", [
      name,
    ]);
    const state =
      found.rows.length === 0 ? "new" : isDeepStrictEqual(found.rows[0]!.value, value) ? "same" : "differs";
    out.push(
      plan(`document ${name}`, state, async () => {
        await db.query(
          `INSERT INTO palaver.documents (name, value) VALUES ($1, $2::jsonb)
           ON CONFLICT (name) DO UPDATE
             SET value = excluded.value, version = palaver.documents.version + 1, updated_at = now()`,
          [name, text],
        );
      }),
    );
  }
  return out;
}

/** A cron entry's id for the report, whatever the entry is. */
function idOf(entry: unknown): string {
  const id = typeof entry === "object" && entry !== null ? (entry as { id?: unknown }).id : undefined;
  return typeof id === "string" && id !== "" ? id : "(without an id)";
}

/** What a JSON round trip makes of a value (what jsonb gives back): undefined fields gone. */
function normalised(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value)) as unknown;
}

function plan(what: string, state: "new" | "same" | "differs", store: () => Promise<void>): Planned {
  if (state === "same") return { what, outcome: "unchanged" };
  if (state === "new") return { what, outcome: "imported", store };
  return { what, outcome: "conflict", detail: "the database holds something else under this name", store };
}

function readIfThere(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new PalaverError(`cannot read ${path}: ${errorMessage(err)}`, { cause: err });
  }
}

// ---- export ----

/** Writes what the database holds as one process's files; returns the files written. */
export async function exportState(
  db: Database,
  to: StateFiles,
  opts: { force: boolean; log: Logger },
): Promise<string[]> {
  const written: string[] = [];
  const write = (path: string, text: string): void => {
    mkdirPrivateSync(dirname(path));
    try {
      writeFilePrivateSync(path, text, opts.force ? "w" : "wx");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "EEXIST")
        throw new PalaverError(
          `${path} already exists; export into an empty folder (--to), or add --force to overwrite (${written.length} file(s) written so far)`,
        );
      throw new PalaverError(`cannot write ${path}: ${errorMessage(err)}`, { cause: err });
    }
    written.push(path);
  };

  const sessions = new PgSessionStore(db, opts.log);
  const keys = await db.query<{ key: string }>("SELECT key FROM palaver.sessions ORDER BY key");
  for (const { key } of keys.rows) {
    const session = await sessions.stored(key);
    if (session) write(join(to.sessionsDir, `${safeKey(key)}.jsonl`), sessionFileText(session));
  }

  const archived = await db.query<{
    session_key: string;
    archived_at: Date;
    created_at: Date;
    updated_at: Date;
    metadata: Record<string, unknown>;
    last_consolidated: number;
    messages: Session["messages"];
  }>("SELECT * FROM palaver.session_archive ORDER BY session_key, archived_at");
  for (const row of archived.rows) {
    const session = new Session(row.session_key, {
      messages: row.messages,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
      metadata: row.metadata,
      lastConsolidated: row.last_consolidated,
    });
    const name = `${safeKey(row.session_key)}.${row.archived_at.getTime()}.jsonl`;
    write(join(to.sessionsDir, "archive", name), sessionFileText(session));
  }

  const jobs = await db.query<{ job: CronJob }>("SELECT job FROM palaver.cron_jobs ORDER BY id");
  if (jobs.rows.length > 0)
    write(
      to.cronPath,
      serialize({ version: STORE_VERSION, jobs: jobs.rows.map((r) => r.job), invalid: [], extra: {} }),
    );

  for (const { name, path } of to.documents) {
    const found = await db.query<{ value: unknown }>("SELECT value FROM palaver.documents WHERE name = $1", [
      name,
    ]);
    // As util/state-file.ts writes them; every reader parses JSON, so the spacing is free.
    if (found.rows.length > 0) write(path, `${JSON.stringify(found.rows[0]!.value, null, 2)}\n`);
  }
  return written;
}

/** A session file as the file store writes it when it rewrites one: the metadata line, then the messages. */
function sessionFileText(session: Session): string {
  return metadataLine(session) + session.messages.map((m) => `${JSON.stringify(m)}\n`).join("");
}
