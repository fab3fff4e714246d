/** A Channel for tests: records what it sends, lets a test "receive" messages, can fail to start. */
import { reservedForm } from "../../src/channels/inbound.js";
import type { InboundMessage, OutboundMessage, TurnEvent } from "../../src/bus/types.js";
import type { Channel, InboundReservation, InboundSink } from "../../src/channels/types.js";

export class TestChannel implements Channel {
  readonly sent: OutboundMessage[] = [];
  /** Turn events the manager forwarded. */
  readonly turns: TurnEvent[] = [];
  startAttempts = 0;
  sendAttempts = 0;
  stopped = false;
  private sink: InboundSink | null = null;

  constructor(
    readonly name: string,
    private readonly opts: {
      failStarts?: number;
      /** The first N sends fail like a platform that is down (Infinity: all). */
      failSends?: number;
      sendDelayMs?: number;
      /** Decides per send whether it fails and how (a ChannelError with permanent / retryAfterMs ...). */
      sendError?: (msg: OutboundMessage, attempt: number) => Error | undefined;
      onStop?: () => void;
    } = {},
  ) {}

  async start(bus: InboundSink): Promise<void> {
    this.startAttempts++;
    if (this.startAttempts <= (this.opts.failStarts ?? 0))
      throw new Error(`401 Unauthorized: bad token for ${this.name}`);
    this.sink = bus;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.opts.onStop?.();
  }

  async send(msg: OutboundMessage): Promise<void> {
    this.sendAttempts++;
    if (this.opts.sendDelayMs) await new Promise((r) => setTimeout(r, this.opts.sendDelayMs));
    if (this.sendAttempts <= (this.opts.failSends ?? 0)) throw new Error("502 Bad Gateway");
    const error = this.opts.sendError?.(msg, this.sendAttempts);
    if (error) throw error;
    this.sent.push(msg);
  }

  onTurn(event: TurnEvent): void {
    this.turns.push(event);
  }

  /**
   * Simulates a message with a slow download: reserved now (as the platform is
   * acknowledged), published when the returned function is called.
   */
  receiveLater(
    msg: Partial<InboundMessage> & { content: string },
  ): (final?: Partial<InboundMessage>) => void {
    if (!this.sink?.reserve) throw new Error(`${this.name} has no reserving sink`);
    const base: InboundMessage = { channel: this.name, senderId: "42", chatId: "chat-1", ...msg };
    // Journaled the way the inbound path does it before a download.
    const reservation = this.sink.reserve(reservedForm(base));
    return (final = {}) => reservation.publish({ ...base, ...final });
  }

  /** Reserves a message as a channel does before slow work, returning the reservation itself. */
  reserveOnly(msg: Partial<InboundMessage> & { content: string }): InboundReservation {
    if (!this.sink?.reserve) throw new Error(`${this.name} has no reserving sink`);
    return this.sink.reserve({ channel: this.name, senderId: "42", chatId: "chat-1", ...msg });
  }

  /** Simulates a message arriving from the platform. */
  receive(msg: Partial<InboundMessage> & { content: string }): void {
    if (!this.sink) throw new Error(`${this.name} is not started`);
    // As a platform's inbound path does it (channels/inbound.ts): the gate once, then one of the two.
    const inbound = { channel: this.name, senderId: "42", chatId: "chat-1", ...msg };
    if (this.sink.allows(inbound)) this.sink.publishInbound(inbound);
    else this.sink.refuse(inbound);
  }
}
