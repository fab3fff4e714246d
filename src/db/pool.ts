/**
 * The cluster's PostgreSQL connection pool (node-postgres). Every wait is bounded: a connection
 * that cannot be had in `connectTimeoutMs` fails, a statement that runs longer than
 * `statementTimeoutMs` is cancelled by the server. An idle client whose connection breaks (the
 * database restarted) is logged and replaced on the next query, never an uncaught error.
 */
import pg from "pg";
import type { Logger } from "../log.js";
import { maskUrlCredentials } from "../util/url-credentials.js";

export type Database = pg.Pool;

/** The first key of every advisory lock palaver takes (two-key form), so it meets no other application's. */
export const ADVISORY_LOCK_SPACE = 0x70616c; // "pal"
export type DatabaseClient = pg.PoolClient;

export interface DatabaseOptions {
  url: string;
  /** Shown in pg_stat_activity: "palaver <instance id>". */
  applicationName: string;
  log: Logger;
  max?: number;
  connectTimeoutMs?: number;
  statementTimeoutMs?: number;
}

export function openDatabase(opts: DatabaseOptions): Database {
  const pool = new pg.Pool({
    connectionString: opts.url,
    application_name: opts.applicationName,
    max: opts.max ?? 10,
    connectionTimeoutMillis: opts.connectTimeoutMs ?? 10_000,
    statement_timeout: opts.statementTimeoutMs ?? 30_000,
    idleTimeoutMillis: 30_000,
    keepAlive: true,
  });
  pool.on("error", (err) => opts.log.warn({ err: err.message }, "database: an idle connection failed"));
  return pool;
}

/** The URL with its password masked, for logs and errors. */
export function shownUrl(url: string): string {
  return maskUrlCredentials(url, "****");
}

/** Runs `work` in one transaction: committed when it returns, rolled back when it throws. */
export async function inTransaction<T>(
  db: Database,
  work: (client: DatabaseClient) => Promise<T>,
): Promise<T> {
  const client = await db.connect();
  try {
    await client.query("BEGIN");
    const result = await work(client);
    await client.query("COMMIT");
    return result;
  } catch (err) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
