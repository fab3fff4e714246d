/**
 * What CronService needs of the place its jobs live: jobs.json (CronStore, one host) or the
 * cluster's database (PgCronStore, every instance). Both hold the same thing, nanobot's job
 * entries (types.ts), so the service's rules do not depend on where they are.
 */
import { STORE_VERSION, type CronJob } from "./types.js";

export interface StoreSnapshot {
  version: number;
  jobs: CronJob[];
  /** Entries that did not validate, written back as they were. */
  invalid: unknown[];
  /** Top-level keys other than version and jobs, kept as they were. */
  extra: Record<string, unknown>;
}

export interface UpdateResult<T> {
  /** What the change function returned. */
  result: T;
  /** The jobs after the change, as written. */
  snapshot: StoreSnapshot;
  /** The store's signature right after the write (see CronJobStore.signature). */
  signature: string | null;
}

export interface CronJobStore {
  /** The jobs as stored now. */
  read(): Promise<StoreSnapshot>;
  /**
   * Reads the jobs, lets `change` modify the snapshot, and writes back what changed, so that a
   * change made meanwhile by another process (or instance) is never overwritten.
   */
  update<T>(change: (snapshot: StoreSnapshot) => T | Promise<T>): Promise<UpdateResult<T>>;
  /** Identifies the stored jobs' current version cheaply; a new value means "read again". */
  signature(): Promise<string | null>;
  /**
   * Called right before a job's scheduled run `dueAtMs` is fired: true when this process is the
   * one that fires it. One process (the file store) always is; in a cluster exactly one instance is.
   */
  claim(jobId: string, dueAtMs: number): Promise<boolean>;
}

export function emptySnapshot(): StoreSnapshot {
  return { version: STORE_VERSION, jobs: [], invalid: [], extra: {} };
}
