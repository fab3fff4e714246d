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
    const now = this.now();
    if (now - this.windowStart >= this.windowMs) {
      this.windowStart = now;
      this.used = 0;
    }
    if (this.used >= this.max) return false;
    this.used++;
    return true;
  }
}
