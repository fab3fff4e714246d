/**
 * Socket Mode: Bolt's SocketModeReceiver, whose client asks
 * apps.connections.open (with the app-level token) for a WebSocket URL, keeps
 * the socket alive with pings, reconnects when Slack drops it and acknowledges
 * each envelope (Bolt acks events itself, and everything else is acked first
 * by the app's middleware, receiver.ts). This adds what palaver needs around
 * it: a bounded first connect with errors in plain words, a guard so a
 * reconnect that fails for good is retried later instead of crashing the
 * daemon, and a close that waits for the socket.
 */
import { SocketModeReceiver, type webApi } from "@slack/bolt";
import type { Logger } from "../../log.js";
import { backoffDelay } from "../../util/backoff.js";
import { ChannelError, errorMessage } from "../../util/errors.js";
import { settleWithin, TimeoutError, withTimeout } from "../../util/timeout.js";
import { BAD_TOKEN, platformError } from "./errors.js";
import type { SlackLogger } from "./logger.js";

export interface SlackSocketOptions {
  appToken: string;
  /** For apps.connections.open: the Web API base and request timeout (its own retry policy stays). */
  clientOptions: Pick<webApi.WebClientOptions, "slackApiUrl" | "timeout">;
  /** Wait for a pong this long; the client's own reconnects wait this long times the failures in a row. */
  clientPingTimeoutMs: number;
  /** Reconnect when Slack's pings stop for this long. */
  serverPingTimeoutMs: number;
  /** First wait before trying again when a reconnect failed for good (doubles, up to 5 min). */
  reconnectRetryMs: number;
  /** Bolt's logger (logger.ts). */
  logger: SlackLogger;
  log: Logger;
}

type SocketClient = SocketModeReceiver["client"];

export class SlackSocket {
  readonly receiver: SocketModeReceiver;
  private readonly lifetime = new AbortController();
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: SlackSocketOptions) {
    this.receiver = new SocketModeReceiver({
      appToken: opts.appToken,
      logger: opts.logger,
      clientPingTimeout: opts.clientPingTimeoutMs,
      serverPingTimeout: opts.serverPingTimeoutMs,
      // The receiver hands these to its Socket Mode client; a fresh object, as the client fills in
      // its own retry policy for apps.connections.open.
      installerOptions: { clientOptions: { ...opts.clientOptions } },
    });
  }

  /** Connects through `start` (the app's start), giving up after `timeoutMs` or when `signal` aborts. */
  async connect(start: () => Promise<unknown>, timeoutMs: number, signal: AbortSignal): Promise<void> {
    try {
      await withTimeout(this.closingLate(start()), timeoutMs, "connecting to Slack Socket Mode", signal);
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

  /** Closes the socket (waiting for it, at most `timeoutMs`); no reconnect after this. */
  async close(timeoutMs: number): Promise<void> {
    this.lifetime.abort();
    clearTimeout(this.retryTimer);
    // The receiver's stop() does not wait for the socket to close; its client's disconnect() does.
    await settleWithin(
      this.receiver.client
        .disconnect()
        .catch((err: unknown) => this.opts.log.warn({ err }, "Socket Mode disconnect failed")),
      timeoutMs,
    );
  }

  /**
   * A start cannot be cancelled: one still under way when the socket is closed (an
   * apps.connections.open retried for minutes, say) would open a socket after the close, so that
   * socket is closed as soon as it opens.
   */
  private closingLate<T>(started: Promise<T>): Promise<T> {
    started.then(
      () => {
        if (this.lifetime.signal.aborted) void this.receiver.client.disconnect();
      },
      () => undefined,
    );
    return started;
  }

  /**
   * The client reconnects by itself, but when a reconnect fails for good (the
   * app token revoked, say) its promise rejects with nobody listening, which
   * would take the whole daemon down. This catches that, reports it, and
   * tries again later. (The client's reconnect calls `this.start` on itself,
   * so the instance's own start is the one to wrap.)
   */
  private guardReconnects(): void {
    const client: SocketClient = this.receiver.client;
    const connect = client.start.bind(client);
    let failures = 0;
    const attempt = async (): Promise<Awaited<ReturnType<typeof connect>>> => {
      // Closed meanwhile: a start now would open a socket nobody closes.
      if (this.lifetime.signal.aborted) return { ok: false };
      try {
        const result = await this.closingLate(connect());
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
