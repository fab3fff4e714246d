import type { InboundMessage, OutboundMessage, TurnEvent } from "./types.js";

type Listener<T> = (msg: T) => void;

/**
 * An in-process message bus with two directions. Inbound messages go to the
 * agent loop; outbound ones to whoever owns the channel. Delivery is
 * synchronous to subscribers, which do their own queueing (the agent loop
 * keeps one lane per session), so publishing never blocks. There is no
 * buffering: whoever must see a message subscribes before it can be
 * published (the gateway starts the loop and the channels before it replays
 * or schedules anything), so every subscriber sees every message.
 */
export class MessageBus {
  private readonly inbound = new Topic<InboundMessage>();
  private readonly outbound = new Topic<OutboundMessage>();
  private readonly turns = new Topic<TurnEvent>();

  publishInbound(msg: InboundMessage): void {
    this.inbound.publish(msg);
  }

  publishOutbound(msg: OutboundMessage): void {
    this.outbound.publish(msg);
  }

  /** A turn started or ended (see TurnEvent); published by the agent loop. */
  publishTurn(event: TurnEvent): void {
    this.turns.publish(event);
  }

  /** Returns an unsubscribe function. */
  onInbound(listener: Listener<InboundMessage>): () => void {
    return this.inbound.subscribe(listener);
  }

  onOutbound(listener: Listener<OutboundMessage>): () => void {
    return this.outbound.subscribe(listener);
  }

  onTurn(listener: Listener<TurnEvent>): () => void {
    return this.turns.subscribe(listener);
  }
}

class Topic<T> {
  private readonly listeners = new Set<Listener<T>>();

  publish(msg: T): void {
    for (const listener of this.listeners) listener(msg);
  }

  subscribe(listener: Listener<T>): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
