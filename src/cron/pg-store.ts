/**
 * The cron jobs in the cluster's database (cluster mode): one row per job in palaver.cron_jobs
 * (`job` = exactly one entry of nanobot's jobs.json), shared by every instance's scheduler.
 *
 * An update reads the rows, lets the service change the snapshot, and writes back only the rows
 * that changed, each on the condition that nobody changed it since it was read (its xmin); when
 * one was, the whole update is rolled back and tried again on fresh rows. So two instances that
 * record runs of different jobs at once never lose each other's state, and a job removed on one
 * instance is never written back by another.
 *
 * Who fires a run is decided by palaver.cron_fired, one row per (job, due time): the instance
 * whose INSERT ... ON CONFLICT DO NOTHING inserts it fires that run, the others leave it. No
 * leader: every instance runs the scheduler. Other instances' changes are seen through
 * signature(), which the service polls (CronServiceOptions.pollIntervalMs).
 */
import { createHash } from "node:crypto";
import type { Database, DatabaseClient } from "../db/pool.js";
import { inTransaction } from "../db/pool.js";
import { logger, type Logger } from "../log.js";
import { PalaverError } from "../util/errors.js";
import { emptySnapshot, type CronJobStore, type StoreSnapshot, type UpdateResult } from "./store-types.js";
import { CronJobSchema, type CronJob } from "./types.js";

export interface PgCronStoreOptions {
  db: Database;
  /** This instance's id, recorded as the one that fired a run. */
  instance: string;
  log?: Logger;
  /** Updates tried again after another instance changed the same job meanwhile (default 5). */
  maxAttempts?: number;
}

/**
 * Fired-run rows written longer ago than this are pruned: by then every instance that raced for
 * that run has long decided (and the job has moved on to a later run).
 */
const FIRED_KEPT_DAYS = 7;
const PRUNE_EVERY_MS = 60 * 60_000;

/** The rows as read: job id → its row version (xmin), which changes with every write. */
type Versions = Map<string, string>;

/** What an update writes back. */
interface RowWrites {
  insert: CronJob[];
  update: CronJob[];
  remove: string[];
}

/** A row changed (or appeared) under an update: rolled back and tried again. */
class RowConflict extends Error {}

export class PgCronStore implements CronJobStore {
  private readonly db: Database;
  private readonly instance: string;
  private readonly log: Logger;
  private readonly maxAttempts: number;
  /** Invalid rows already warned about (by id and version), so a poll does not warn every 2 s. */
  private readonly warned = new Set<string>();
  private prunedAt = 0;

  constructor(opts: PgCronStoreOptions) {
    this.db = opts.db;
    this.instance = opts.instance;
    this.log = opts.log ?? logger("cron");
    this.maxAttempts = Math.max(1, opts.maxAttempts ?? 5);
  }

  async read(): Promise<StoreSnapshot> {
    return (await this.load()).snapshot;
  }

  async signature(): Promise<string | null> {
    const { rows } = await this.db.query<{ id: string; version: string }>(
      "SELECT id, xmin::text AS version FROM palaver.cron_jobs ORDER BY id",
    );
    return signatureOf(new Map(rows.map((r) => [r.id, r.version])));
  }

  async update<T>(change: (snapshot: StoreSnapshot) => T | Promise<T>): Promise<UpdateResult<T>> {
    for (let attempt = 1; ; attempt++) {
      const { snapshot, versions } = await this.load();
      const before = new Map(snapshot.jobs.map((j) => [j.id, JSON.stringify(j)]));
      const result = await change(snapshot);
      const writes = rowWrites(before, snapshot.jobs);
      try {
        const after = await this.write(writes, versions);
        return { result, snapshot, signature: signatureOf(after) };
      } catch (err) {
        if (!(err instanceof RowConflict) && !isDeadlock(err)) throw err;
        if (attempt >= this.maxAttempts) {
          throw new PalaverError(
            `the cron jobs in the cluster database kept changing under this update (${attempt} attempts)`,
          );
        }
        this.log.debug({ attempt }, "cron: a job changed on another instance meanwhile; updating again");
      }
    }
  }

  async claim(jobId: string, dueAtMs: number): Promise<boolean> {
    const inserted = await this.db.query(
      `INSERT INTO palaver.cron_fired (job_id, due_at, fired_by)
       VALUES ($1, to_timestamp($2::double precision / 1000), $3) ON CONFLICT DO NOTHING`,
      [jobId, dueAtMs, this.instance],
    );
    if (inserted.rowCount === 1) await this.pruneFired();
    return inserted.rowCount === 1;
  }

  private async load(): Promise<{ snapshot: StoreSnapshot; versions: Versions }> {
    const { rows } = await this.db.query<{ id: string; job: unknown; version: string }>(
      "SELECT id, job, xmin::text AS version FROM palaver.cron_jobs ORDER BY id",
    );
    const snapshot = emptySnapshot();
    const versions: Versions = new Map();
    for (const row of rows) {
      versions.set(row.id, row.version);
      const parsed = CronJobSchema.safeParse(row.job);
      if (parsed.success && parsed.data.id === row.id) {
        snapshot.jobs.push(parsed.data);
        continue;
      }
      // Kept as it is (never written back), like an invalid entry of jobs.json.
      snapshot.invalid.push(row.job);
      const key = `${row.id}:${row.version}`;
      if (this.warned.has(key)) continue;
      this.warned.add(key);
      const problem = parsed.success
        ? `its job.id is ${parsed.data.id}`
        : parsed.error.issues.map((i) => `${i.path.join(".") || "(job)"}: ${i.message}`).join("; ");
      this.log.warn({ id: row.id, problem }, "cron job skipped: its row in palaver.cron_jobs is not valid");
    }
    return { snapshot, versions };
  }

  /** Writes in one transaction, each row only if unchanged since read; the versions afterwards. */
  private async write(writes: RowWrites, read: Versions): Promise<Versions> {
    if (!writes.insert.length && !writes.update.length && !writes.remove.length) return read;
    return inTransaction(this.db, async (client) => {
      const after = new Map(read);
      for (const job of writes.insert) {
        const row = await client.query<{ version: string }>(
          `INSERT INTO palaver.cron_jobs (id, job) VALUES ($1, $2) ON CONFLICT DO NOTHING
           RETURNING xmin::text AS version`,
          [job.id, job],
        );
        after.set(job.id, versionOf(row.rows));
      }
      for (const job of writes.update) {
        const row = await client.query<{ version: string }>(
          `UPDATE palaver.cron_jobs SET job = $2, updated_at = now() WHERE id = $1 AND xmin::text = $3
           RETURNING xmin::text AS version`,
          [job.id, job, read.get(job.id)],
        );
        after.set(job.id, versionOf(row.rows));
      }
      for (const id of writes.remove) {
        await removeRow(client, id, read.get(id));
        after.delete(id);
      }
      return after;
    });
  }

  /** Drops fired-run rows nobody can ask about again, at most once an hour per instance. */
  private async pruneFired(): Promise<void> {
    const now = Date.now();
    if (now - this.prunedAt < PRUNE_EVERY_MS) return;
    this.prunedAt = now;
    await this.db
      .query(`DELETE FROM palaver.cron_fired WHERE fired_at < now() - make_interval(days => $1)`, [
        FIRED_KEPT_DAYS,
      ])
      .catch((err: unknown) => this.log.warn({ err }, "cron: could not prune palaver.cron_fired"));
  }
}

async function removeRow(client: DatabaseClient, id: string, version: string | undefined): Promise<void> {
  const removed = await client.query("DELETE FROM palaver.cron_jobs WHERE id = $1 AND xmin::text = $2", [
    id,
    version,
  ]);
  if (removed.rowCount !== 1) throw new RowConflict(id);
}

/** Two updates that lock the same rows in different orders: PostgreSQL ends one, which tries again. */
function isDeadlock(err: unknown): boolean {
  return (err as { code?: unknown }).code === "40P01";
}

function versionOf(rows: { version: string }[]): string {
  const row = rows[0];
  if (!row) throw new RowConflict();
  return row.version;
}

/** Pure: the rows an update writes, from the jobs as read (id → JSON) and as changed. */
function rowWrites(before: Map<string, string>, jobs: CronJob[]): RowWrites {
  const writes: RowWrites = { insert: [], update: [], remove: [] };
  const kept = new Set<string>();
  for (const job of jobs) {
    kept.add(job.id);
    const was = before.get(job.id);
    if (was === undefined) writes.insert.push(job);
    else if (was !== JSON.stringify(job)) writes.update.push(job);
  }
  for (const id of before.keys()) if (!kept.has(id)) writes.remove.push(id);
  return writes;
}

/** Pure: one value for the rows' ids and versions; it changes with any write, insert or delete. */
function signatureOf(versions: Versions): string {
  const text = [...versions]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([id, version]) => `${id}:${version}`)
    .join(",");
  return createHash("sha256").update(text).digest("hex");
}
