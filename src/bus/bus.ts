import type { InboundMessage, OutboundMessage } from "./types.js";

type Listener<T> = (msg: T) => void;

/**
 * An in-process message bus with two directions. Inbound messages go to the
 * agent loop; outbound ones to whoever owns the channel. Delivery is
 * synchronous to subscribers, which do their own queueing (the agent loop
 * keeps one lane per session), so publishing never blocks and never loses a
 * message that has a subscriber. Messages published before anyone subscribes
 * are held (bounded) and handed to the first subscriber.
 */
export class MessageBus {
  private readonly inbound = new Topic<InboundMessage>();
  private readonly outbound = new Topic<OutboundMessage>();

  publishInbound(msg: InboundMessage): void {
    this.inbound.publish(msg);
  }

  publishOutbound(msg: OutboundMessage): void {
    this.outbound.publish(msg);
  }

  /** Returns an unsubscribe function. */
  onInbound(listener: Listener<InboundMessage>): () => void {
    return this.inbound.subscribe(listener);
  }

  onOutbound(listener: Listener<OutboundMessage>): () => void {
    return this.outbound.subscribe(listener);
  }
}

const MAX_HELD = 10_000;

class Topic<T> {
  private readonly listeners = new Set<Listener<T>>();
  private held: T[] = [];

  publish(msg: T): void {
    if (this.listeners.size === 0) {
      if (this.held.length >= MAX_HELD) this.held.shift();
      this.held.push(msg);
      return;
    }
    for (const listener of this.listeners) listener(msg);
  }

  subscribe(listener: Listener<T>): () => void {
    this.listeners.add(listener);
    const held = this.held;
    this.held = [];
    for (const msg of held) listener(msg);
    return () => this.listeners.delete(listener);
  }
}
