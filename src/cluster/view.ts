/**
 * What the cluster looks like from the database: the instances alive, who holds each lease, the
 * turns queued and running, the conversations blocked. Read by the gateway every few seconds (for
 * /status, /metrics and /readyz, which must answer without waiting on the database) and by
 * `palaver status` once.
 */
import { aliveInstances, type InstanceInfo } from "../db/instances.js";
import { leaseHolders } from "../db/lease.js";
import { LEASES } from "../db/names.js";
import type { Database } from "../db/pool.js";

export interface ClusterInstance extends InstanceInfo {
  startedAt: string;
  seenAt: string;
}

export interface ClusterView {
  instances: ClusterInstance[];
  /** Lease name → the instance holding it; a lease nobody holds is absent. */
  leases: Record<string, string>;
  turns: {
    queued: number;
    running: number;
    /** Session keys whose turn failed every retry: nothing of theirs runs until unblocked. */
    blocked: string[];
  };
}

/** Reads the view; `blocked` asks the job queue (pg-boss) which conversations it holds back. */
export async function readClusterView(db: Database, blocked: () => Promise<string[]>): Promise<ClusterView> {
  const [instances, holders, turns, blockedKeys] = await Promise.all([
    aliveInstances(db),
    leaseHolders(db, LEASES),
    db.query<{ state: string; n: string }>(
      "SELECT state, count(*) AS n FROM palaver.inbound WHERE state <> 'done' GROUP BY state",
    ),
    blocked(),
  ]);
  const count = (state: string) => Number(turns.rows.find((r) => r.state === state)?.n ?? 0);
  return {
    instances: instances.map((row) => ({
      ...row,
      startedAt: row.startedAt.toISOString(),
      seenAt: row.seenAt.toISOString(),
    })),
    leases: Object.fromEntries(holders),
    turns: { queued: count("queued"), running: count("running"), blocked: blockedKeys },
  };
}
