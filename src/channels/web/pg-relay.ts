/**
 * The web relay over PostgreSQL LISTEN/NOTIFY (db/notify.ts): one notification channel for the
 * whole cluster's web chat, each event tagged with the instance that published it so an
 * instance skips its own (its tabs had the event already).
 *
 * Events can be lost when a connection breaks: a listener that reconnects tells its tabs to
 * reload, and a publisher whose events could not be sent tells every instance to, once it can.
 */
import { jsonPayload, type Notifier } from "../../db/notify.js";
import type { Logger } from "../../log.js";
import { errorMessage } from "../../util/errors.js";
import type { PublishedEvent, RelayedEvent, RelayListener, WebRelay } from "./relay.js";

/** The notification channel (per database: two clusters on one server never meet). */
const WEB_RELAY_CHANNEL = "palaver_web";

export interface PgWebRelayOptions {
  notifier: Notifier;
  /** This instance's id: events carrying it are this instance's own. */
  instance: string;
  log: Logger;
}

/** What goes over the channel: an event, or "some of mine were lost: reload". */
type Envelope = ({ from: string } & RelayedEvent) | { from: string; resync: true };

export class PgWebRelay implements WebRelay {
  private listener: RelayListener | null = null;
  private listening = false;
  /** Some event could not be sent: the others are told to resync once the connection is back. */
  private owesResync = false;

  constructor(private readonly opts: PgWebRelayOptions) {}

  publish(relayed: RelayedEvent): void {
    this.send({ from: this.opts.instance, ...relayed });
  }

  async start(listener: RelayListener): Promise<void> {
    this.listener = listener;
    if (this.listening) return;
    this.listening = true;
    this.opts.notifier.onReconnect(() => {
      this.listener?.resync();
      if (this.owesResync) {
        this.owesResync = false;
        this.send({ from: this.opts.instance, resync: true });
      }
    });
    await this.opts.notifier.listen(WEB_RELAY_CHANNEL, (payload) => this.receive(payload));
  }

  stop(): void {
    this.listener = null;
  }

  private send(envelope: Envelope): void {
    this.opts.notifier.notify(WEB_RELAY_CHANNEL, JSON.stringify(envelope)).catch((err: unknown) => {
      // Once per outage: while the connection is down every event fails alike.
      if (!this.owesResync) {
        this.opts.log.warn(
          { err: errorMessage(err) },
          "web relay: events could not reach the other instances; their tabs reload when it is back",
        );
      }
      this.owesResync = true;
    });
  }

  private receive(payload: string): void {
    const envelope = envelopeOf(payload);
    if (!envelope) {
      this.opts.log.warn("web relay: a notification that is not a web event was ignored");
      return;
    }
    if (envelope.from === this.opts.instance) return;
    if ("resync" in envelope) {
      this.listener?.resync();
      return;
    }
    const { from: _from, ...relayed } = envelope;
    this.listener?.deliver(relayed);
  }
}

/** The envelope in a notification, or undefined when it is not one (another program on the channel). */
function envelopeOf(payload: string): Envelope | undefined {
  const value = jsonPayload(payload);
  if (typeof value !== "object" || value === null) return undefined;
  const { from, event, background, files, resync } = value as Record<string, unknown>;
  if (typeof from !== "string") return undefined;
  if (resync === true) return { from, resync };
  if (typeof background !== "boolean" || !isEvent(event)) return undefined;
  if (files !== undefined && !isPathMap(files)) return undefined;
  return { from, event, background, ...(files ? { files } : {}) };
}

function isEvent(value: unknown): value is PublishedEvent {
  if (typeof value !== "object" || value === null) return false;
  const { type, conversationId } = value as { type?: unknown; conversationId?: unknown };
  return typeof type === "string" && type !== "ping" && typeof conversationId === "string";
}

function isPathMap(value: unknown): value is Record<string, string> {
  return (
    typeof value === "object" &&
    value !== null &&
    Object.values(value).every((path) => typeof path === "string")
  );
}
