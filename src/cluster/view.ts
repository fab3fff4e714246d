/**
 * What the cluster looks like from the database: the instances alive, who holds each lease, the
 * turns queued and running, the conversations blocked. Read by the gateway every few seconds (for
 * /status, /metrics and /readyz, which must answer without waiting on the database) and by
 * `palaver status` once.
 */
import { aliveInstances, type InstanceInfo } from "../db/instances.js";
import { INGRESS_LEASES, leaseHolders } from "../db/lease.js";
import type { Database } from "../db/pool.js";

/** The leases an instance may hold. */
export const LEASES = Object.values(INGRESS_LEASES);

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

/** Pure: the view in the words of /status and `palaver status`: instances, leases, turns. */
export function clusterStatusLines(view: ClusterView, self?: string): string[] {
  const names = view.instances.map((i) => (i.id === self ? `${i.id} (this one)` : i.id));
  const leases = LEASES.map((lease) => `${lease.replace("ingress:", "")}: ${view.leases[lease] ?? "nobody"}`);
  const { queued, running, blocked } = view.turns;
  const count = view.instances.length;
  return [
    `${count} instance${count === 1 ? "" : "s"} alive: ${names.join(", ") || "none"}`,
    `leases: ${leases.join(", ")}`,
    `turns: ${queued} queued, ${running} running` +
      (blocked.length ? `, ${blocked.length} conversation(s) blocked: ${blocked.join(", ")}` : ""),
  ];
}
