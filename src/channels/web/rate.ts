import { BoundedMap } from "../../util/bounded-map.js";

/** At most `max` events per window: a guard rail for what costs (new conversations, LLM turns). */
export class RateLimit {
  private windowStart = 0;
  private used = 0;

  constructor(
    private readonly max: number,
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Counts one event; false when the window's budget is spent. */
  take(): boolean {
    if (this.spent()) return false;
    this.used++;
    return true;
  }

  /** Whether the window's budget is spent (counts nothing). */
  spent(): boolean {
    const now = this.now();
    if (now - this.windowStart >= this.windowMs) {
      this.windowStart = now;
      this.used = 0;
    }
    return this.used >= this.max;
  }
}

/** Clients remembered by a ClientLimits: a crowd of addresses cannot grow it past this. */
const MAX_CLIENTS = 10_000;

/**
 * A RateLimit per client (its address), so one client spending its budget does not spend anyone
 * else's. The oldest clients are forgotten first past MAX_CLIENTS, and each after its window.
 */
export class ClientLimits {
  private readonly limits: BoundedMap<string, RateLimit>;

  constructor(
    private readonly max: number,
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.limits = new BoundedMap(MAX_CLIENTS, windowMs, now);
  }

  /** Counts one event of `client`; false when its budget is spent. */
  take(client: string): boolean {
    let limit = this.limits.get(client);
    if (!limit) {
      limit = new RateLimit(this.max, this.windowMs, this.now);
      this.limits.set(client, limit);
    }
    return limit.take();
  }

  /** Whether `client`'s budget is spent (counts nothing). */
  spent(client: string): boolean {
    return this.limits.get(client)?.spent() ?? false;
  }
}
