/**
 * Socket Mode: @slack/socket-mode's client, which asks apps.connections.open
 * (with the app-level token) for a WebSocket URL, keeps the socket alive with
 * pings and reconnects when Slack drops it. This adds what palaver needs
 * around it: a bounded first connect with errors in plain words, a guard so a
 * reconnect that fails for good is retried later instead of crashing the
 * daemon, and every delivery acknowledged before it is handed on.
 */
import { SocketModeClient } from "@slack/socket-mode";
import type { WebClientOptions } from "@slack/web-api";
import type { Logger } from "../../log.js";
import { backoffDelay } from "../../util/backoff.js";
import { ChannelError, errorMessage } from "../../util/errors.js";
import { settleWithin, TimeoutError, withTimeout } from "../../util/timeout.js";
import { fromEnvelope, type Delivery } from "./dispatch.js";
import { BAD_TOKEN, platformError } from "./errors.js";
import { slackLogger } from "./logger.js";

export interface SlackSocketOptions {
  appToken: string;
  /** For apps.connections.open: the Web API base, request timeout and fetch. */
  clientOptions: Pick<WebClientOptions, "slackApiUrl" | "timeout" | "fetch">;
  /** Wait for a pong this long; the client's own reconnects wait this long times the failures in a row. */
  clientPingTimeoutMs: number;
  /** Reconnect when Slack's pings stop for this long. */
  serverPingTimeoutMs: number;
  /** First wait before trying again when a reconnect failed for good (doubles, up to 5 min). */
  reconnectRetryMs: number;
  log: Logger;
  /** A delivery, its ack already on its way. */
  onDelivery(delivery: Delivery): void;
}

/** What the client emits as `slack_event` for every envelope (hello and disconnect excepted). */
interface SocketEnvelope {
  type: string;
  body: unknown;
  ack: (response?: Record<string, unknown>) => Promise<void>;
  retry_num?: number;
}

export class SlackSocket {
  private readonly client: SocketModeClient;
  private readonly lifetime = new AbortController();
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: SlackSocketOptions) {
    this.client = new SocketModeClient({
      appToken: opts.appToken,
      logger: slackLogger(opts.log.child({ sdk: "socket-mode" })),
      clientPingTimeout: opts.clientPingTimeoutMs,
      serverPingTimeout: opts.serverPingTimeoutMs,
      // A fresh object: the client fills in its own retry policy for apps.connections.open.
      clientOptions: { ...opts.clientOptions },
    });
    this.client.on("slack_event", (envelope: SocketEnvelope) => this.receive(envelope));
  }

  /** Connects, giving up after `timeoutMs` or when `signal` aborts. */
  async connect(timeoutMs: number, signal: AbortSignal): Promise<void> {
    try {
      await withTimeout(this.start(), timeoutMs, "connecting to Slack Socket Mode", signal);
    } catch (err) {
      if (signal.aborted) throw new ChannelError("stopped while connecting to Slack", { cause: err });
      if (err instanceof TimeoutError) {
        throw new ChannelError(`Slack Socket Mode did not connect within ${Math.round(timeoutMs / 1000)} s`);
      }
      const code = platformError(err);
      if (code && BAD_TOKEN.has(code)) {
        throw new ChannelError(
          "the Slack app-level token was rejected (check channels.slack.appToken: an xapp- token " +
            `with the connections:write scope, and Socket Mode enabled for the app): ${code}`,
          { cause: err },
        );
      }
      throw new ChannelError(`Slack Socket Mode could not connect: ${errorMessage(err)}`, { cause: err });
    }
    this.guardReconnects();
  }

  /**
   * The client's start. It cannot be cancelled: one still under way when the socket is closed (an
   * apps.connections.open retried for minutes, say) would open a socket after the close, so that
   * socket is closed as soon as it opens.
   */
  private start(connect = this.client.start.bind(this.client)): ReturnType<SocketModeClient["start"]> {
    const started = connect();
    started.then(
      () => {
        if (this.lifetime.signal.aborted) void this.client.disconnect();
      },
      () => undefined,
    );
    return started;
  }

  /** Closes the socket (waiting for it, at most `timeoutMs`); no reconnect after this. */
  async close(timeoutMs: number): Promise<void> {
    this.lifetime.abort();
    clearTimeout(this.retryTimer);
    await settleWithin(
      this.client
        .disconnect()
        .catch((err: unknown) => this.opts.log.warn({ err }, "Socket Mode disconnect failed")),
      timeoutMs,
    );
  }

  /** Acknowledged first (Slack resends an event, or shows the user an error, without), then handed on. */
  private receive(envelope: SocketEnvelope): void {
    envelope
      .ack()
      .catch((err: unknown) =>
        this.opts.log.warn({ err, type: envelope.type }, "could not acknowledge a Slack delivery"),
      );
    if (envelope.retry_num) {
      this.opts.log.debug({ type: envelope.type, retry: envelope.retry_num }, "Slack sent a delivery again");
    }
    try {
      this.opts.onDelivery(fromEnvelope(envelope.type, envelope.body));
    } catch (err) {
      this.opts.log.error({ err }, "Slack event handling failed");
    }
  }

  /**
   * The client reconnects by itself, but when a reconnect fails for good (the
   * app token revoked, say) its promise rejects with nobody listening, which
   * would take the whole daemon down. This catches that, reports it, and
   * tries again later. (The client's reconnect calls `this.start`, so the
   * instance's own start is the one to wrap.)
   */
  private guardReconnects(): void {
    const client = this.client;
    const connect = client.start.bind(client);
    let failures = 0;
    const attempt = async (): Promise<Awaited<ReturnType<typeof connect>>> => {
      // Closed meanwhile: a start now would open a socket nobody closes.
      if (this.lifetime.signal.aborted) return { ok: false };
      try {
        const result = await this.start(connect);
        failures = 0;
        return result;
      } catch (err) {
        failures++;
        const delayMs = backoffDelay(failures - 1, this.opts.reconnectRetryMs, 300_000);
        this.opts.log.error({ err, retryInMs: Math.round(delayMs) }, "Slack Socket Mode could not reconnect");
        if (!this.lifetime.signal.aborted) {
          clearTimeout(this.retryTimer);
          this.retryTimer = setTimeout(() => void attempt(), delayMs);
        }
        // Nobody reads this result (the client's reconnect path ignores it); an empty response stands in.
        return { ok: false };
      }
    };
    client.start = attempt;
  }
}
