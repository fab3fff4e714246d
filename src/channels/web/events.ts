/**
 * The event streams of the web chat: every tab subscribed to a conversation gets each of its
 * events as a server-sent event. Writes never wait: a tab whose unread events pass a bound (a
 * sleeping laptop, a stalled proxy) is dropped, and the page reconnects and reloads the history.
 * A ping every 25 s keeps proxies from closing idle streams.
 */
import type { ServerResponse } from "node:http";
import type { WebEvent } from "./protocol.js";
import { SECURITY_HEADERS } from "./http.js";

export interface EventHubOptions {
  /** Between pings (default 25 s). */
  pingMs?: number;
  /** Unsent bytes a client may have before it is dropped (default 1 MB). */
  maxBufferedBytes?: number;
  /** Open streams at most, over all conversations (default 64). */
  maxClients?: number;
}

interface Client {
  res: ServerResponse;
}

export class EventHub {
  private readonly byConversation = new Map<string, Set<Client>>();
  private readonly timer: NodeJS.Timeout;
  private count = 0;

  constructor(private readonly opts: EventHubOptions = {}) {
    this.timer = setInterval(() => this.pingAll(), opts.pingMs ?? 25_000);
    this.timer.unref();
  }

  get clients(): number {
    return this.count;
  }

  /**
   * Opens a stream on `res` for one conversation and writes `replay` first (what a tab joining
   * mid-turn must know). False when too many streams are open: the caller answers 503.
   */
  subscribe(conversationId: string, res: ServerResponse, replay: WebEvent[]): boolean {
    if (this.count >= (this.opts.maxClients ?? 64)) return false;
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store",
      // nginx buffers responses unless told not to; a buffered stream shows nothing until it ends.
      "x-accel-buffering": "no",
    });
    res.flushHeaders();
    const client: Client = { res };
    let set = this.byConversation.get(conversationId);
    if (!set) this.byConversation.set(conversationId, (set = new Set()));
    set.add(client);
    this.count++;
    // The response's close is the connection's (a request's own close may come when its body ends).
    res.once("close", () => this.remove(conversationId, client));
    for (const event of replay) this.write(client, conversationId, event);
    return true;
  }

  publish(event: Exclude<WebEvent, { type: "ping" }>): void {
    const set = this.byConversation.get(event.conversationId);
    if (!set) return;
    for (const client of [...set]) this.write(client, event.conversationId, event);
  }

  /** Ends every stream (the channel stops). */
  close(): void {
    clearInterval(this.timer);
    this.endAll();
  }

  /** Ends every stream but stays open: the pages reconnect and reload what they may have missed. */
  endAll(): void {
    for (const [conversationId, set] of this.byConversation) {
      for (const client of [...set]) {
        this.remove(conversationId, client);
        client.res.end();
      }
    }
  }

  private pingAll(): void {
    for (const [conversationId, set] of this.byConversation) {
      for (const client of [...set]) this.write(client, conversationId, { type: "ping" });
    }
  }

  private write(client: Client, conversationId: string, event: WebEvent): void {
    const { res } = client;
    if (res.destroyed || res.writableEnded) return;
    res.write(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
    if (res.writableLength > (this.opts.maxBufferedBytes ?? 1024 * 1024)) {
      // It cannot keep up: holding more for it would grow without bound.
      this.remove(conversationId, client);
      res.destroy();
    }
  }

  private remove(conversationId: string, client: Client): void {
    const set = this.byConversation.get(conversationId);
    if (!set?.delete(client)) return;
    this.count--;
    if (set.size === 0) this.byConversation.delete(conversationId);
  }
}
