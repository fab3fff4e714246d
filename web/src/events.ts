/**
 * The turn events of one conversation (`GET /api/events?conversation=<id>`) over EventSource,
 * which reconnects by itself. Every event arrives as `event: <type>`, so each type is listened to
 * by name; `onReopen` runs after a reconnect, when events may have been missed.
 */
import type { WebEvent, WebEventType } from "../../src/channels/web/protocol.js";

/** Every event type, so a type added to the protocol is a compile error here until listened to. */
const TYPES: Record<WebEventType, true> = {
  user: true,
  turnStart: true,
  progress: true,
  toolHint: true,
  delta: true,
  plan: true,
  final: true,
  question: true,
  questionClosed: true,
  turnEnd: true,
  ping: true,
};

export interface EventHandlers {
  onEvent(event: WebEvent): void;
  /** The stream came back after a break: the caller reloads what it may have missed. */
  onReopen(): void;
  /** The browser gave up (EventSource closed: a 401 or the server gone). */
  onClosed(): void;
}

export function subscribe(conversationId: string, handlers: EventHandlers): () => void {
  const source = new EventSource(`/api/events?conversation=${encodeURIComponent(conversationId)}`);
  let broken = false;
  const onMessage = (e: MessageEvent<string>) => {
    let event: WebEvent;
    try {
      event = JSON.parse(e.data) as WebEvent;
    } catch {
      return; // not ours: ignore rather than break the stream
    }
    if (event.type === "ping") return;
    handlers.onEvent(event);
  };
  for (const type of Object.keys(TYPES)) source.addEventListener(type, onMessage);
  source.addEventListener("open", () => {
    if (!broken) return;
    broken = false;
    handlers.onReopen();
  });
  source.addEventListener("error", () => {
    broken = true;
    if (source.readyState === EventSource.CLOSED) handlers.onClosed();
  });
  return () => source.close();
}
