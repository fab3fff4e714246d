/**
 * Replies waiting for a channel that is not running (not enabled, stopped, retrying its start):
 * kept per channel, oldest first, until it runs. Bounded: past `maxPerChannel` the oldest is pushed out.
 */
export class HeldReplies<T> {
  private readonly byChannel = new Map<string, T[]>();

  constructor(readonly maxPerChannel = 1000) {}

  /** Keeps `reply`; returns the oldest reply pushed out when the channel's list was full. */
  hold(channel: string, reply: T): T | undefined {
    let list = this.byChannel.get(channel);
    if (!list) {
      list = [];
      this.byChannel.set(channel, list);
    }
    list.push(reply);
    return list.length > this.maxPerChannel ? list.shift() : undefined;
  }

  /** Takes every reply kept for `channel`, oldest first. */
  take(channel: string): T[] {
    const list = this.byChannel.get(channel) ?? [];
    this.byChannel.delete(channel);
    return list;
  }

  count(channel: string): number {
    return this.byChannel.get(channel)?.length ?? 0;
  }

  /** How many wait, per channel that has any. */
  counts(): Record<string, number> {
    return Object.fromEntries([...this.byChannel].map(([channel, list]) => [channel, list.length]));
  }

  /** Forgets the replies `drop` says no longer wait (dropped elsewhere); returns them. */
  discard(drop: (reply: T) => boolean): T[] {
    const gone: T[] = [];
    for (const [channel, list] of this.byChannel) {
      const kept: T[] = [];
      for (const reply of list) (drop(reply) ? gone : kept).push(reply);
      if (kept.length) this.byChannel.set(channel, kept);
      else this.byChannel.delete(channel);
    }
    return gone;
  }
}
