/**
 * The cluster's instances (palaver.instances): each gateway registers itself at start, refreshes
 * its row every few seconds while it runs and marks it stopped at a graceful stop. An instance
 * killed outright leaves its row behind; it counts as alive only while its heartbeat is recent,
 * which is what `palaver status`, /status and /metrics show.
 */
import type { Logger } from "../log.js";
import { errorMessage } from "../util/errors.js";
import type { Database } from "./pool.js";

export interface InstanceInfo {
  /** The gateway's instance id (`<hostname>-<pid>-<random4>`). */
  id: string;
  host: string;
  pid: number;
  /** palaver's version. */
  version: string;
  /** gateway.port, when it serves HTTP. */
  port: number | null;
}

export interface InstanceRow extends InstanceInfo {
  startedAt: Date;
  seenAt: Date;
}

export interface InstanceRegistryOptions {
  db: Database;
  instance: InstanceInfo;
  log: Logger;
  /** Between heartbeats (default 5 s); keep it well under the `withinSeconds` readers use. */
  heartbeatMs?: number;
}

/** How recent a heartbeat must be for the instance to count as alive (default of aliveInstances). */
export const ALIVE_WITHIN_SECONDS = 30;

export class InstanceRegistry {
  private timer: NodeJS.Timeout | null = null;
  private beating: Promise<void> | null = null;
  private readonly heartbeatMs: number;

  constructor(private readonly opts: InstanceRegistryOptions) {
    this.heartbeatMs = opts.heartbeatMs ?? 5000;
  }

  /** Writes this instance's row (a restart under the same id starts afresh) and starts the heartbeat. */
  async register(): Promise<void> {
    const { id, host, pid, version, port } = this.opts.instance;
    await this.opts.db.query(
      `INSERT INTO palaver.instances (id, host, pid, version, port) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, version = excluded.version,
         port = excluded.port, started_at = now(), seen_at = now(), stopped_at = NULL`,
      [id, host, pid, version, port],
    );
    this.schedule();
  }

  /** Stops the heartbeat and marks the row stopped, so others stop counting it at once. */
  async stop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.beating;
    await this.opts.db.query("UPDATE palaver.instances SET stopped_at = now() WHERE id = $1", [
      this.opts.instance.id,
    ]);
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      this.beating = this.beat().finally(() => {
        this.beating = null;
        // stop() cleared the timer meanwhile: no next beat.
        if (this.timer) this.schedule();
      });
    }, this.heartbeatMs);
    // The heartbeat never keeps the process alive by itself.
    this.timer.unref();
  }

  private async beat(): Promise<void> {
    try {
      await this.opts.db.query("UPDATE palaver.instances SET seen_at = now() WHERE id = $1", [
        this.opts.instance.id,
      ]);
    } catch (err) {
      // The database is away for a moment: the next beat tries again; readers see us as stale meanwhile.
      this.opts.log.warn({ err: errorMessage(err) }, "cluster: instance heartbeat failed");
    }
  }
}

/** The instances seen within `withinSeconds` and not stopped, oldest first. */
export async function aliveInstances(
  db: Pick<Database, "query">,
  withinSeconds = ALIVE_WITHIN_SECONDS,
): Promise<InstanceRow[]> {
  const rows = await db.query<{
    id: string;
    host: string;
    pid: number;
    version: string;
    port: number | null;
    started_at: Date;
    seen_at: Date;
  }>(
    `SELECT id, host, pid, version, port, started_at, seen_at FROM palaver.instances
      WHERE stopped_at IS NULL AND seen_at > now() - make_interval(secs => $1)
      ORDER BY started_at, id`,
    [withinSeconds],
  );
  return rows.rows.map((r) => ({
    id: r.id,
    host: r.host,
    pid: r.pid,
    version: r.version,
    port: r.port,
    startedAt: r.started_at,
    seenAt: r.seen_at,
  }));
}
