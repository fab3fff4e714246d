import type { MessageBus } from "../bus/bus.js";
import type { OutboundMessage } from "../bus/types.js";

/** One chat platform. See ARCHITECTURE.md "Interfaces". */
export interface Channel {
  readonly name: string;
  /** Connects and starts publishing inbound messages; resolves once running. */
  start(bus: MessageBus, signal: AbortSignal): Promise<void>;
  stop(): Promise<void>;
  send(msg: OutboundMessage): Promise<void>;
}
