/**
 * A lease: at most one instance of the cluster holds it at a time (the Telegram poller, the
 * Discord gateway connection). It is a PostgreSQL session advisory lock taken on a connection of
 * its own, so it ends with that connection: an instance killed with -9 loses it as soon as the
 * server sees the socket close, and another instance, trying every `retryMs`, takes it over.
 * The holder pings its connection at the same pace and gives the lease up (onLost) the moment
 * the connection fails, before the server could hand it to someone else.
 */
import pg from "pg";
import type { Logger } from "../log.js";
import { errorMessage } from "../util/errors.js";
import { ADVISORY_LOCK_SPACE } from "./pool.js";

export { INGRESS_LEASES } from "./names.js";

export interface LeaseOptions {
  url: string;
  /** What is leased: "ingress:telegram". */
  name: string;
  /** This instance's id, shown to the others as the holder (application_name). */
  instance: string;
  log: Logger;
  /** Between attempts to take it, and between pings while held (default 2 s). */
  retryMs?: number;
  onAcquired?: () => void;
  onLost?: () => void;
}

/** The lock's second key: a stable positive 31-bit hash of the lease's name (FNV-1a). */
export function leaseKey(name: string): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(name, "utf8")) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash & 0x7fffffff;
}

export class Lease {
  private client: pg.Client | null = null;
  private timer: NodeJS.Timeout | null = null;
  private running = false;
  /**
   * Bumped by every start() and stop(): a tick still awaiting its connection or query when the
   * lease is stopped (and perhaps started again) belongs to an earlier generation, and once it
   * resumes it touches nothing (the connection, the holding, the timer) and schedules nothing.
   */
  private generation = 0;
  private holding = false;
  /** How many times it tried to take the lease (tests, status). */
  attempts = 0;
  private readonly retryMs: number;
  private readonly acquiredListeners: (() => void)[] = [];
  private readonly lostListeners: (() => void)[] = [];

  constructor(private readonly opts: LeaseOptions) {
    this.retryMs = opts.retryMs ?? 2000;
  }

  get held(): boolean {
    return this.holding;
  }

  /** Also called when the lease is taken (besides the options' onAcquired): what channels/ingress-lease.ts needs. */
  onAcquired(listener: () => void): void {
    this.acquiredListeners.push(listener);
  }

  /** Also called when the lease is given up or lost. */
  onLost(listener: () => void): void {
    this.lostListeners.push(listener);
  }

  /** Starts trying to take the lease (at once, then every retryMs until taken); no-op while started. */
  start(): void {
    if (this.running) return;
    this.running = true;
    void this.tick(++this.generation);
  }

  /** Gives the lease up (if held) and closes its connection. */
  async stop(): Promise<void> {
    this.running = false;
    this.generation++;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const client = this.client;
    this.client = null;
    if (this.holding) this.lose();
    // Closing the connection releases the lock; no unlock statement needed.
    await client?.end().catch(() => undefined);
  }

  private async tick(generation: number): Promise<void> {
    const current = (): boolean => generation === this.generation;
    try {
      const client = await this.connection();
      if (!current()) return;
      if (this.holding) {
        await client.query("SELECT 1");
      } else {
        this.attempts++;
        const taken = await client.query<{ ok: boolean }>("SELECT pg_try_advisory_lock($1, $2) AS ok", [
          ADVISORY_LOCK_SPACE,
          leaseKey(this.opts.name),
        ]);
        // Taken on a connection stop() has closed meanwhile: the close released it.
        if (!current()) return;
        if (taken.rows[0]?.ok) {
          this.holding = true;
          this.opts.log.info({ lease: this.opts.name }, "cluster: lease taken");
          this.opts.onAcquired?.();
          for (const listener of this.acquiredListeners) listener();
        }
      }
    } catch (err) {
      // Failed because stop() closed the connection under it: that is no loss of the current one.
      if (!current()) return;
      this.dropConnection(err);
    }
    if (current()) this.timer = setTimeout(() => void this.tick(generation), this.retryMs);
  }

  private async connection(): Promise<pg.Client> {
    if (this.client) return this.client;
    const client = new pg.Client({
      connectionString: this.opts.url,
      application_name: `palaver ${this.opts.instance}`,
      connectionTimeoutMillis: this.retryMs * 2,
      query_timeout: this.retryMs * 2,
      keepAlive: true,
    });
    // A broken connection means the lock is gone (or about to be): stop acting as the holder now.
    // Only the current connection counts: one stop() closed is no news.
    client.on("error", (err) => {
      if (this.client === client) this.dropConnection(err);
    });
    client.on("end", () => {
      if (this.client === client) this.dropConnection(new Error("connection closed"));
    });
    this.client = client;
    await client.connect();
    return client;
  }

  private dropConnection(err: unknown): void {
    const client = this.client;
    this.client = null;
    void client?.end().catch(() => undefined);
    if (this.holding) {
      this.opts.log.warn({ lease: this.opts.name, err: errorMessage(err) }, "cluster: lease lost");
      this.lose();
    }
  }

  private lose(): void {
    this.holding = false;
    this.opts.onLost?.();
    for (const listener of this.lostListeners) listener();
  }
}

/** Who holds each lease now: lease name → the holder's instance id (from its connection's name). */
export async function leaseHolders(
  db: { query: pg.Pool["query"] },
  names: readonly string[],
): Promise<Map<string, string>> {
  const keys = names.map(leaseKey);
  const rows = await db.query<{ objid: number; app: string }>(
    `SELECT l.objid::bigint AS objid, a.application_name AS app
       FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.classid = $1
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND l.objid::bigint = ANY($2::bigint[])`,
    [ADVISORY_LOCK_SPACE, keys],
  );
  const holders = new Map<string, string>();
  for (const row of rows.rows) {
    const name = names[keys.indexOf(Number(row.objid))];
    if (name) holders.set(name, row.app.replace(/^palaver /, ""));
  }
  return holders;
}
