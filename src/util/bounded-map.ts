/** A Map that forgets its oldest entries past a size, and entries older than a time to live. */
export class BoundedMap<K, V> {
  private readonly entries = new Map<K, { value: V; at: number }>();

  constructor(
    private readonly maxSize: number,
    private readonly ttlMs = Number.POSITIVE_INFINITY,
    private readonly now: () => number = Date.now,
  ) {}

  get(key: K): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    // Without a time to live, no clock is read (a hot path: token counts of every prompt text).
    if (this.ttlMs !== Number.POSITIVE_INFINITY && this.now() - entry.at > this.ttlMs) {
      this.entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  has(key: K): boolean {
    return this.get(key) !== undefined;
  }

  set(key: K, value: V): void {
    this.entries.delete(key); // re-insert so the Map stays in age order
    this.entries.set(key, { value, at: this.now() });
    while (this.entries.size > this.maxSize) {
      const oldest = this.entries.keys().next();
      if (oldest.done) break;
      this.entries.delete(oldest.value);
    }
  }

  delete(key: K): void {
    this.entries.delete(key);
  }

  /** Keys from the oldest to the newest (expired ones included until they are read). */
  keys(): IterableIterator<K> {
    return this.entries.keys();
  }

  get size(): number {
    return this.entries.size;
  }
}
