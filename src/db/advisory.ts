/**
 * A cluster-wide mutex: a PostgreSQL session advisory lock held on one pooled connection while
 * `work` runs, so work on shared files (MEMORY.md in a workspace every instance sees) happens on
 * one instance at a time. Waiting for it is bounded by the pool's statement timeout.
 */
import { leaseKey } from "./lease.js";
import { ADVISORY_LOCK_SPACE, type Database } from "./pool.js";

export async function withClusterLock<T>(db: Database, name: string, work: () => Promise<T>): Promise<T> {
  const client = await db.connect();
  const key = [ADVISORY_LOCK_SPACE, leaseKey(name)];
  try {
    await client.query("SELECT pg_advisory_lock($1, $2)", key);
    try {
      return await work();
    } finally {
      await client.query("SELECT pg_advisory_unlock($1, $2)", key);
    }
  } finally {
    client.release();
  }
}
