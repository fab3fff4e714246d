/**
 * Work run one at a time per key, in the order it was queued; different keys
 * run concurrently. One job's failure never blocks the next: run() rejects for
 * the caller, the chain goes on. Keys with nothing queued are forgotten.
 */
export class KeyedQueue {
  private readonly tails = new Map<string, Promise<void>>();

  run<T>(key: string, work: () => Promise<T> | T): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const result = previous.then(() => work());
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }

  /** Queues work whose failure the caller does not await (it must handle its own errors). */
  push(key: string, work: () => Promise<void> | void): void {
    this.run(key, work).catch(() => undefined);
  }

  /** How many keys have work queued or running. */
  get size(): number {
    return this.tails.size;
  }

  /** Whether work is queued or running for `key`. */
  busy(key: string): boolean {
    return this.tails.has(key);
  }

  /** Resolves when `key`'s queue is empty, including work queued for it while waiting. */
  async idleFor(key: string): Promise<void> {
    for (let tail = this.tails.get(key); tail; tail = this.tails.get(key)) await tail;
  }

  /** Resolves when every key's queue is empty, including work queued while waiting. */
  async idle(): Promise<void> {
    while (this.tails.size > 0) await Promise.all(this.tails.values());
  }
}
