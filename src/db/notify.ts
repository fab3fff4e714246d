/**
 * PostgreSQL LISTEN/NOTIFY on one connection of its own (a pooled connection would lose its
 * LISTENs when handed back). Notifications go out in the order notify() was called and reach
 * every handler in the order they were sent, so events of one chat stay in order.
 *
 * A payload too big for a notification (PostgreSQL refuses 8000 bytes or more) is stored in
 * palaver.notify_payloads and notified by its row id; the listeners read the row, and rows older
 * than `keepMs` are deleted. When the connection breaks, the notifier reconnects with backoff,
 * LISTENs again and tells onReconnect's callbacks: what others sent meanwhile never arrives.
 * Its own notify() calls meanwhile wait for the reconnect, each at most `timeoutMs` and at most
 * MAX_WAITING of them; the rest are refused (the caller decides what a lost one means).
 */
import pg from "pg";
import type { Logger } from "../log.js";
import { backoffDelay } from "../util/backoff.js";
import { errorMessage } from "../util/errors.js";
import { TimeoutError, withTimeout } from "../util/timeout.js";

/** PostgreSQL's limit is "shorter than 8000 bytes"; the wire adds one marker character. */
const MAX_NOTIFICATION_BYTES = 7999;
/** Marks of the wire form: the payload itself, or the id of its stored row. */
const INLINE = "=";
const STORED = "@";
/** Notifications waiting to go out (the connection is down) before new ones are refused at once. */
const MAX_WAITING = 1000;

export type NotificationHandler = (payload: string) => void;

/** A notification's payload read as JSON; undefined when it is not JSON (another program on the channel). */
export function jsonPayload(payload: string): unknown {
  try {
    return JSON.parse(payload) as unknown;
  } catch {
    return undefined;
  }
}

export interface NotifierOptions {
  url: string;
  /** This instance's id, in the connection's application_name. */
  instance: string;
  log: Logger;
  /** The first reconnect delay, doubled per failed attempt up to maxRetryMs (defaults 500 ms, 30 s). */
  retryMs?: number;
  maxRetryMs?: number;
  /** Bounds connecting, each statement and how long notify() waits for a connection (default 10 s). */
  timeoutMs?: number;
  /** How long a stored big payload is kept for the listeners to read (default 60 s). */
  keepMs?: number;
}

/**
 * Notifies `payload` on `channel` within the transaction `client` runs: PostgreSQL sends it at
 * commit, and never when the transaction rolls back. It is in the wire form a Notifier's handlers
 * receive. Small payloads only: a bigger one is refused (notify() stores those, outside any transaction).
 */
export async function notifyAtCommit(
  client: Pick<pg.ClientBase, "query">,
  channel: string,
  payload: string,
): Promise<void> {
  if (Buffer.byteLength(payload, "utf8") + INLINE.length > MAX_NOTIFICATION_BYTES) {
    throw new Error(
      `a notification on ${channel} sent at commit must be shorter than ${MAX_NOTIFICATION_BYTES} bytes`,
    );
  }
  await client.query("SELECT pg_notify($1, $2)", [channel, INLINE + payload]);
}

export class Notifier {
  private readonly handlers = new Map<string, Set<NotificationHandler>>();
  private readonly reconnected = new Set<() => void>();
  private client: pg.Client | null = null;
  private connecting: Promise<pg.Client> | null = null;
  /** The notifications going out, one after another: their order is the order of notify(). */
  private outgoing: Promise<unknown> = Promise.resolve();
  /** The notifications coming in: a stored payload is read before the next one is handed on. */
  private incoming: Promise<void> = Promise.resolve();
  private retryTimer: NodeJS.Timeout | null = null;
  private sweepTimer: NodeJS.Timeout | null = null;
  private failures = 0;
  private broken = false;
  private closed = false;
  private waiting = 0;
  /** Settles when a connection is up again (after a break), or rejects at close(). */
  private up = deferred<pg.Client>();
  private readonly timeoutMs: number;
  private readonly keepMs: number;

  constructor(private readonly opts: NotifierOptions) {
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    this.keepMs = opts.keepMs ?? 60_000;
  }

  /** Calls `handler` with every payload notified on `channel` from now on (by any connection, this one too). */
  async listen(channel: string, handler: NotificationHandler): Promise<void> {
    let set = this.handlers.get(channel);
    const first = !set;
    if (!set) this.handlers.set(channel, (set = new Set()));
    set.add(handler);
    try {
      const client = await this.connection();
      // A connection made meanwhile may have LISTENed already; a second LISTEN changes nothing.
      if (first) await client.query(`LISTEN ${client.escapeIdentifier(channel)}`);
    } catch (err) {
      // The handler stays: the reconnect LISTENs for it.
      if (!this.client && !this.broken) {
        this.broken = true;
        this.up = deferred();
      }
      this.scheduleReconnect();
      throw err;
    }
  }

  /** Calls `callback` after each reconnect: notifications sent while the connection was down are lost. */
  onReconnect(callback: () => void): void {
    this.reconnected.add(callback);
  }

  /** Sends `payload` on `channel`, after every earlier notify(); rejects when it could not be sent within timeoutMs. */
  notify(channel: string, payload: string): Promise<void> {
    if (this.waiting >= MAX_WAITING) {
      return Promise.reject(new Error(`${MAX_WAITING} notifications are already waiting for the database`));
    }
    const deadline = Date.now() + this.timeoutMs;
    this.waiting++;
    const sent = this.outgoing
      .then(() => this.send(channel, payload, deadline))
      .finally(() => this.waiting--);
    this.outgoing = sent.catch(() => undefined);
    return sent;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.up.reject(new Error("the notifier is closed"));
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    await withTimeout(this.outgoing, this.timeoutMs, "sending the last notifications").catch(() => undefined);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }

  private async send(channel: string, payload: string, deadline: number): Promise<void> {
    const client = await this.ready(deadline - Date.now());
    if (Buffer.byteLength(payload, "utf8") + INLINE.length <= MAX_NOTIFICATION_BYTES) {
      await client.query("SELECT pg_notify($1, $2)", [channel, INLINE + payload]);
      return;
    }
    // One statement: the row and its notification commit together, and expired rows go.
    await client.query(
      `WITH swept AS (
         DELETE FROM palaver.notify_payloads WHERE created_at < now() - $3 * interval '1 millisecond'
       ), stored AS (
         INSERT INTO palaver.notify_payloads (channel, payload) VALUES ($1, $2) RETURNING id
       )
       SELECT pg_notify($1, $4 || id) FROM stored`,
      [channel, payload, this.keepMs, STORED],
    );
  }

  /** The connection to send on: the open one, the first, or (after a break) the reconnect loop's. */
  private ready(ms: number): Promise<pg.Client> {
    if (this.client) return Promise.resolve(this.client);
    const what = "waiting for the database connection to notify";
    if (ms <= 0) return Promise.reject(new TimeoutError(what, this.timeoutMs));
    // After a break, the reconnect loop (with its backoff) brings the connection back: wait for it.
    return withTimeout(this.broken ? this.up.promise : this.connection(), ms, what);
  }

  /** The open connection, or a new one that LISTENs on every channel asked for. */
  private connection(): Promise<pg.Client> {
    if (this.closed) return Promise.reject(new Error("the notifier is closed"));
    if (this.client) return Promise.resolve(this.client);
    this.connecting ??= this.connect().finally(() => (this.connecting = null));
    return this.connecting;
  }

  private async connect(): Promise<pg.Client> {
    const client = new pg.Client({
      connectionString: this.opts.url,
      application_name: `palaver ${this.opts.instance} notify`,
      connectionTimeoutMillis: this.timeoutMs,
      query_timeout: this.timeoutMs,
      keepAlive: true,
    });
    client.on("error", (err) => this.lost(client, err));
    client.on("end", () => this.lost(client, new Error("connection closed")));
    client.on("notification", (msg) => {
      const { channel, payload } = msg;
      if (payload === undefined) return;
      this.incoming = this.incoming.then(() => this.deliver(client, channel, payload));
    });
    try {
      await client.connect();
      for (const channel of this.handlers.keys()) {
        await client.query(`LISTEN ${client.escapeIdentifier(channel)}`);
      }
    } catch (err) {
      client.removeAllListeners("end");
      await client.end().catch(() => undefined);
      throw err;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      throw new Error("the notifier is closed");
    }
    this.client = client;
    this.failures = 0;
    this.up.resolve(client);
    this.sweepTimer ??= setInterval(() => void this.sweep(), this.keepMs);
    this.sweepTimer.unref();
    if (this.broken) {
      this.broken = false;
      this.opts.log.info("database: notifications are back (some may have been missed)");
      for (const callback of this.reconnected) callback();
    }
    return client;
  }

  private lost(client: pg.Client, err: unknown): void {
    if (this.client !== client) return;
    this.client = null;
    void client.end().catch(() => undefined);
    if (this.closed) return;
    this.broken = true;
    this.up = deferred();
    this.opts.log.warn(
      { err: errorMessage(err) },
      "database: the notification connection broke; reconnecting",
    );
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.closed || this.retryTimer) return;
    const ms = backoffDelay(this.failures++, this.opts.retryMs ?? 500, this.opts.maxRetryMs ?? 30_000);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      if (this.client || this.closed) return;
      this.connection().catch((err: unknown) => {
        this.opts.log.warn(
          { err: errorMessage(err), attempt: this.failures },
          "database: reconnecting for notifications failed",
        );
        this.scheduleReconnect();
      });
    }, ms);
    this.retryTimer.unref();
  }

  private async deliver(client: pg.Client, channel: string, wire: string): Promise<void> {
    let payload: string | undefined;
    if (wire.startsWith(INLINE)) payload = wire.slice(INLINE.length);
    else if (wire.startsWith(STORED)) payload = await this.stored(client, wire.slice(STORED.length));
    if (payload === undefined) return;
    for (const handler of this.handlers.get(channel) ?? []) {
      try {
        handler(payload);
      } catch (err) {
        this.opts.log.warn({ channel, err: errorMessage(err) }, "database: a notification handler failed");
      }
    }
  }

  private async stored(client: pg.Client, id: string): Promise<string | undefined> {
    try {
      const row = await client.query<{ payload: string }>(
        "SELECT payload FROM palaver.notify_payloads WHERE id = $1",
        [id],
      );
      if (row.rows[0]) return row.rows[0].payload;
      this.opts.log.warn({ id }, "database: a stored notification was gone before it was read");
    } catch (err) {
      this.opts.log.warn({ id, err: errorMessage(err) }, "database: a stored notification could not be read");
    }
    return undefined;
  }

  private async sweep(): Promise<void> {
    await this.client
      ?.query(
        "DELETE FROM palaver.notify_payloads WHERE created_at < now() - $1 * interval '1 millisecond'",
        [this.keepMs],
      )
      .catch(() => undefined);
  }
}

interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(err: Error): void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // Nobody may be waiting when it is rejected at close().
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}
