/**
 * The cluster's tables, in schema `palaver` (pg-boss keeps its own, `pgboss`). Migrations run in
 * order, each in its own transaction, by whichever instance starts first, under an advisory lock
 * (the others wait for it, then find nothing to do). An instance of an older palaver that finds a
 * newer schema refuses to start: it would misread rows it does not know.
 *
 * A new version is appended to MIGRATIONS; a released one is never edited.
 */
import type { Logger } from "../log.js";
import { PalaverError } from "../util/errors.js";
import { ADVISORY_LOCK_SPACE, type Database } from "./pool.js";

/** Each entry brings the schema from version index to index + 1. */
const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE palaver.meta (key text PRIMARY KEY, value text NOT NULL);

  -- Every instance alive or recently alive: written at start and every few seconds.
  CREATE TABLE palaver.instances (
    id text PRIMARY KEY,
    host text NOT NULL,
    pid integer NOT NULL,
    version text NOT NULL,
    port integer,
    started_at timestamptz NOT NULL DEFAULT now(),
    seen_at timestamptz NOT NULL DEFAULT now(),
    stopped_at timestamptz,
    info jsonb NOT NULL DEFAULT '{}'
  );

  -- One row per admitted platform message: a redelivery (same dedupe_key) is refused here.
  CREATE TABLE palaver.inbound (
    id bigserial PRIMARY KEY,
    dedupe_key text UNIQUE,
    session_key text NOT NULL,
    message jsonb NOT NULL,
    received_by text NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    state text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'done')),
    starts integer NOT NULL DEFAULT 0,
    started_at timestamptz,
    done_at timestamptz
  );
  CREATE INDEX inbound_open ON palaver.inbound (received_at) WHERE state <> 'done';

  -- The final replies of a turn, numbered within it: sent once whichever instance runs it again.
  CREATE TABLE palaver.outbox (
    turn_id text NOT NULL,
    seq integer NOT NULL,
    channel text NOT NULL,
    chat_id text NOT NULL,
    message jsonb NOT NULL,
    state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'dropped')),
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at timestamptz,
    sent_by text,
    PRIMARY KEY (turn_id, seq)
  );
  CREATE INDEX outbox_pending ON palaver.outbox (created_at) WHERE state = 'pending';

  -- The tool journal (agent/tool-replay.ts): side-effecting calls of a turn, by call key.
  CREATE TABLE palaver.tool_calls (
    inbound_id bigint NOT NULL,
    name text NOT NULL,
    args text NOT NULL,
    n integer NOT NULL,
    state text NOT NULL CHECK (state IN ('started', 'done')),
    result text,
    turn_state jsonb,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (inbound_id, name, args, n)
  );

  -- Sessions (nanobot's JSONL files, one row per line): messages only ever appended. json, not
  -- jsonb: keys come back in the order they were written (jsonb sorts them), so an exported
  -- session file has the bytes of the one imported.
  CREATE TABLE palaver.sessions (
    key text PRIMARY KEY,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    metadata json NOT NULL DEFAULT '{}',
    last_consolidated integer NOT NULL DEFAULT 0
  );
  CREATE TABLE palaver.session_messages (
    session_key text NOT NULL REFERENCES palaver.sessions (key) ON DELETE CASCADE,
    seq integer NOT NULL,
    message json NOT NULL,
    PRIMARY KEY (session_key, seq)
  );

  -- Cron: the jobs (nanobot's jobs.json entries) and one row per job and due time that fired.
  CREATE TABLE palaver.cron_jobs (
    id text PRIMARY KEY,
    job jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
  );
  CREATE TABLE palaver.cron_fired (
    job_id text NOT NULL,
    due_at timestamptz NOT NULL,
    fired_by text NOT NULL,
    fired_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, due_at)
  );

  -- The small shared state files of one process (pairing.json, approval rules, open questions),
  -- one row each, changed under a row lock.
  CREATE TABLE palaver.documents (
    name text PRIMARY KEY,
    value jsonb NOT NULL,
    version bigint NOT NULL DEFAULT 1,
    updated_at timestamptz NOT NULL DEFAULT now()
  );

  -- web relay: NOTIFY payloads too big for a notification (db/notify.ts), read by id, kept a minute.
  CREATE TABLE palaver.notify_payloads (
    id bigserial PRIMARY KEY,
    channel text NOT NULL,
    payload text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
  );
  CREATE INDEX notify_payloads_age ON palaver.notify_payloads (created_at);
  -- sessions: the conversations /new ended (the file store's sessions/archive/), one row each,
  -- kept so nothing said is lost; messages = the JSON array of the messages in order.
  CREATE TABLE palaver.session_archive (
    id bigserial PRIMARY KEY,
    session_key text NOT NULL,
    archived_at timestamptz NOT NULL DEFAULT now(),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    metadata json NOT NULL,
    last_consolidated integer NOT NULL,
    messages json NOT NULL
  );
  CREATE INDEX session_archive_key ON palaver.session_archive (session_key, archived_at);
  `,
];

/** The schema version this build writes and understands. */
export const SCHEMA_VERSION = MIGRATIONS.length;

const MIGRATION_LOCK = 1;

/** Brings the database to SCHEMA_VERSION; throws, changing nothing, when it is newer than that. */
export async function migrate(db: Database, log: Logger): Promise<{ from: number; to: number }> {
  const client = await db.connect();
  try {
    // Session-level lock on this one connection: the others wait here until the first is done.
    await client.query("SELECT pg_advisory_lock($1, $2)", [ADVISORY_LOCK_SPACE, MIGRATION_LOCK]);
    try {
      await client.query("CREATE SCHEMA IF NOT EXISTS palaver");
      const from = await versionOf(client);
      if (from > SCHEMA_VERSION) throw tooNew(from);
      for (let v = from; v < SCHEMA_VERSION; v++) {
        await client.query("BEGIN");
        try {
          await client.query(MIGRATIONS[v]!);
          await client.query(
            `INSERT INTO palaver.meta (key, value) VALUES ('schema_version', $1)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
            [String(v + 1)],
          );
          await client.query("COMMIT");
        } catch (err) {
          await client.query("ROLLBACK").catch(() => undefined);
          throw err;
        }
        log.info({ version: v + 1 }, "database: schema migrated");
      }
      return { from, to: SCHEMA_VERSION };
    } finally {
      await client.query("SELECT pg_advisory_unlock($1, $2)", [ADVISORY_LOCK_SPACE, MIGRATION_LOCK]);
    }
  } finally {
    client.release();
  }
}

/** The database's schema version: 0 before the first migration. */
export async function schemaVersion(db: Pick<Database, "query">): Promise<number> {
  return versionOf(db);
}

async function versionOf(db: Pick<Database, "query">): Promise<number> {
  const exists = await db.query<{ t: string | null }>("SELECT to_regclass('palaver.meta') AS t");
  if (!exists.rows[0]?.t) return 0;
  const row = await db.query<{ value: string }>(
    "SELECT value FROM palaver.meta WHERE key = 'schema_version'",
  );
  return row.rows[0] ? Number(row.rows[0].value) : 0;
}

function tooNew(found: number): PalaverError {
  return new PalaverError(
    `the cluster database has schema version ${found}, newer than this palaver understands (${SCHEMA_VERSION}): ` +
      "another instance runs a newer palaver. Upgrade palaver here too (docs/cluster.md, Upgrades); " +
      "this instance changed nothing",
  );
}
