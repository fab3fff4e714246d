/**
 * The cluster's view (view.ts) in words. Apart from view.ts, which reads it from the database:
 * `palaver status` formats it without loading the PostgreSQL client.
 */
import { LEASES } from "../db/names.js";
import type { ClusterView } from "./view.js";

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
