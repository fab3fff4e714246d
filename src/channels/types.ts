import type { InboundMessage, OutboundMessage, TurnEvent } from "../bus/types.js";

/** Where a channel puts what it receives. The manager hands each channel one that checks access first. */
export interface InboundSink {
  /**
   * Whether this sender may talk to the bot here. Adapters ask once, before any download, reaction
   * or typing indicator: a refused sender causes no side effect but the refusal notice, which
   * publishInbound sends.
   */
  allows(msg: InboundMessage): boolean;
  publishInbound(msg: InboundMessage): void;
  /**
   * For a message that needs slow work (downloads) before it can be published:
   * journals it now, so it survives a crash even though the platform is
   * acknowledged before the work is done. Publish the finished message through
   * the returned reservation.
   */
  reserve?(msg: InboundMessage): InboundReservation;
}

export interface InboundReservation {
  publish(msg: InboundMessage): void;
  /** The message turned out not to be for the agent after all (e.g. an album nobody mentioned the bot in). */
  cancel(): void;
}

/** One chat platform. docs/architecture.md describes the path of a message through it. */
export interface Channel {
  readonly name: string;
  /** Connects and starts publishing inbound messages; resolves once running, rejects when it cannot connect. */
  start(bus: InboundSink, signal: AbortSignal): Promise<void>;
  stop(): Promise<void>;
  /**
   * Delivers one message. Rejects with a ChannelError whose `permanent` says whether trying again
   * can ever succeed (the outbox drops permanent failures at once and retries the others).
   */
  send(msg: OutboundMessage): Promise<void>;
  /** A turn in one of this channel's chats started or ended: typing indicators, receipt reactions. */
  onTurn?(event: TurnEvent): void;
}
