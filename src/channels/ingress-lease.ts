/**
 * Cluster mode: an ingress that must run on one instance at a time (Telegram's long polling,
 * Discord's gateway connection) runs while this instance holds its lease, and only then. Sending
 * needs no lease: every instance sends the replies of the turns it runs.
 *
 * `IngressLease` is what a channel needs of a lease (db/lease.ts's Lease has it, on a PostgreSQL
 * advisory lock); the gateway lends one per name through GatewayServices.lease. `LeasedIngress`
 * starts the ingress when the lease is taken and ends it at once when the lease is lost.
 */
import type { Logger } from "../log.js";
import { backoffDelay, sleep } from "../util/backoff.js";

export { INGRESS_LEASES } from "../db/names.js";

export interface IngressLease {
  /** Whether this instance holds it now. */
  readonly held: boolean;
  /** Starts trying to take it (and keeps trying until taken, and again after it is lost). */
  start(): void;
  /** Gives it up (calling the onLost listeners if it was held) and stops trying. */
  stop(): Promise<void>;
  onAcquired(listener: () => void): void;
  onLost(listener: () => void): void;
}

export interface LeasedIngressOptions {
  lease: IngressLease;
  /** For the log: "Telegram polling". */
  what: string;
  /**
   * Starts the ingress; resolves once it runs. `signal` aborts when the lease is lost. A rejection
   * is retried (after end()) with backoff while the lease is held.
   */
  begin(signal: AbortSignal): Promise<void>;
  /** Ends the ingress; safe to call when it is not running or only half started. */
  end(): Promise<void>;
  log: Logger;
  retryBaseMs?: number;
  retryMaxMs?: number;
}

/**
 * Runs an ingress exactly while the lease is held. Changes are applied one at a time in order, so
 * a lease lost while the ingress still starts ends it as soon as the start settles (the start is
 * aborted through its signal first).
 */
export class LeasedIngress {
  private wanted = false;
  private running = false;
  private driving: Promise<void> | null = null;
  /** Aborted when the lease is lost: ends a start under way and its backoff wait. */
  private holding: AbortController | null = null;
  private failures = 0;

  constructor(private readonly opts: LeasedIngressOptions) {
    opts.lease.onAcquired(() => this.want(true));
    opts.lease.onLost(() => this.want(false));
  }

  /** Whether the ingress runs here now. */
  get active(): boolean {
    return this.running;
  }

  /** Starts competing for the lease; the ingress runs whenever it is held. */
  start(): void {
    this.opts.lease.start();
  }

  /** Gives the lease up and ends the ingress (once whatever change is under way has settled). */
  async stop(): Promise<void> {
    await this.opts.lease.stop();
    this.want(false);
    await this.driving;
  }

  private want(on: boolean): void {
    this.wanted = on;
    if (!on) this.holding?.abort();
    // Started in a microtask, so `driving` is set before drive() can clear it.
    this.driving ??= Promise.resolve().then(() => this.drive());
  }

  private async drive(): Promise<void> {
    const { opts } = this;
    try {
      while (this.running !== this.wanted) {
        if (!this.wanted) {
          await this.end();
          continue;
        }
        const holding = new AbortController();
        this.holding = holding;
        try {
          await opts.begin(holding.signal);
          this.running = true;
          this.failures = 0;
          opts.log.info(`${opts.what} runs on this instance (it holds the lease)`);
        } catch (err) {
          await this.end();
          if (holding.signal.aborted) continue;
          const waitMs = backoffDelay(this.failures++, opts.retryBaseMs ?? 1000, opts.retryMaxMs ?? 30_000);
          opts.log.error(
            { err, retryInMs: waitMs },
            `${opts.what} could not start; retrying while the lease is held`,
          );
          await sleep(waitMs, holding.signal).catch(() => undefined);
        }
      }
    } finally {
      this.driving = null;
    }
  }

  private async end(): Promise<void> {
    const wasRunning = this.running;
    this.running = false;
    await this.opts
      .end()
      .catch((err: unknown) => this.opts.log.warn({ err }, `ending ${this.opts.what} failed`));
    if (wasRunning) this.opts.log.info(`${this.opts.what} stopped on this instance (lease given up or lost)`);
  }
}
