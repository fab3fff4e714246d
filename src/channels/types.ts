import type { InboundMessage, OutboundMessage } from "../bus/types.js";

/** Where a channel puts what it receives. The manager hands each channel one that checks access first. */
export interface InboundSink {
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

/** One chat platform. See ARCHITECTURE.md "Interfaces". */
export interface Channel {
  readonly name: string;
  /** Connects and starts publishing inbound messages; resolves once running, rejects when it cannot connect. */
  start(bus: InboundSink, signal: AbortSignal): Promise<void>;
  stop(): Promise<void>;
  send(msg: OutboundMessage): Promise<void>;
}
