/**
 * The web chat across a cluster's instances: a tab's event stream is held by one instance while
 * the turn it watches may run on another. Every event a web channel pushes to its tabs also goes
 * to the relay, and every instance's web channel pushes the events relayed from the others to
 * the tabs it holds. Without a relay (one process) the channel works alone, as it always did.
 */
import type { WebEvent } from "./protocol.js";

export type PublishedEvent = Exclude<WebEvent, { type: "ping" }>;

export interface RelayedEvent {
  event: PublishedEvent;
  /** A turnStart of cron or a subagent, which answers no message (LiveState.see). */
  background: boolean;
  /** The paths of the files a final names, by file id: the workspace is shared, so any instance can serve them. */
  files?: Record<string, string>;
}

export interface RelayListener {
  /** An event another instance published; one instance's events come in the order it published them. */
  deliver(relayed: RelayedEvent): void;
  /** Events may have been lost (the relay's connection broke): the tabs should reload what they show. */
  resync(): void;
}

export interface WebRelay {
  /** Sends an event to the other instances; never throws (a failure is logged, the local tabs have it). */
  publish(relayed: RelayedEvent): void;
  /** Delivers the other instances' events to `listener` from now on; rejects when it cannot listen yet. */
  start(listener: RelayListener): Promise<void>;
  /** Stops delivering. */
  stop(): void;
}
