/**
 * Socket Mode: a Bolt receiver of palaver's own (Bolt's `Receiver` interface)
 * around @slack/socket-mode's client, which asks apps.connections.open (with
 * the app-level token) for a WebSocket URL, keeps the socket alive with pings
 * and reconnects when Slack drops it. Each envelope goes to the app's
 * processEvent with an ack that is sent on the socket at once, or, when the
 * app asks for it (cluster mode), only once processEvent is done, i.e. once
 * the message is stored (at most `ackWaitMs`): Bolt acks an Events API event
 * before its listeners run, and Bolt's own SocketModeReceiver sends that ack
 * at once, so an instance killed in between lost the message Slack was told
 * it had. This adds what palaver needs around it too: a bounded first connect
 * with errors in plain words, a guard so a reconnect that fails for good is
 * retried later instead of crashing the daemon, and a close that waits for
 * the socket.
 */
import {
  defaultProcessEventErrorHandler,
  type App,
  type Receiver,
  type ReceiverEvent,
  type webApi,
} from "@slack/bolt";
import { SocketModeClient } from "@slack/socket-mode";
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
  /**
   * Acknowledge an envelope only once the app has handled it (cluster mode: the message is stored),
   * at most `ackWaitMs` after it arrived; otherwise as soon as the app acks it.
   */
  ackAfterHandOn: boolean;
  ackWaitMs: number;
  /** Bolt's logger (logger.ts). */
  logger: SlackLogger;
  log: Logger;
}

/** What Socket Mode's client hands its `slack_event` listeners (the parts read here). */
interface SocketEnvelope {
  ack: (response?: Record<string, unknown>) => Promise<void>;
  envelope_id?: string;
  body: ReceiverEvent["body"];
  retry_num?: number;
  retry_reason?: string;
}

export class SlackSocket implements Receiver {
  readonly client: SocketModeClient;
  private app: App | undefined;
  private readonly lifetime = new AbortController();
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: SlackSocketOptions) {
    this.client = new SocketModeClient({
      appToken: opts.appToken,
      logger: opts.logger,
      clientPingTimeout: opts.clientPingTimeoutMs,
      serverPingTimeout: opts.serverPingTimeoutMs,
      // A fresh object, as the client fills in its own retry policy for apps.connections.open.
      clientOptions: { ...opts.clientOptions },
    });
    this.client.on("slack_event", (envelope: SocketEnvelope) => {
      this.onEnvelope(envelope).catch((err: unknown) =>
        opts.log.warn(
          { err, envelope: envelope.envelope_id },
          "could not acknowledge a Slack Socket Mode envelope (Slack sends it again)",
        ),
      );
    });
  }

  /** Bolt's Receiver: the app hands itself over when it is built. */
  init(app: App): void {
    this.app = app;
  }

  /** Bolt's Receiver: the app's start (see connect). */
  start(): Promise<unknown> {
    return this.client.start();
  }

  /** Bolt's Receiver: the app's stop. */
  async stop(): Promise<void> {
    await this.client.disconnect();
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
    await settleWithin(
      this.client
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
        if (this.lifetime.signal.aborted) void this.client.disconnect();
      },
      () => undefined,
    );
    return started;
  }

  /**
   * One envelope through the app, as Bolt's SocketModeReceiver does it, except when the ack is
   * sent: held (ackAfterHandOn), it goes out once processEvent is done (its listeners awaited, as
   * Bolt's HTTPReceiver does with processBeforeResponse) or ackWaitMs passed, whichever comes
   * first. Slack sends an envelope not acknowledged within 3 s again, maybe to another connection,
   * and such a duplicate is refused later (the inbound row's dedupe key), so an ack that comes late
   * does no harm.
   */
  private async onEnvelope(envelope: SocketEnvelope): Promise<void> {
    const app = this.app;
    if (!app) return;
    const held = this.opts.ackAfterHandOn;
    const reply = new EnvelopeAck(envelope, held, this.opts.logger);
    const event: ReceiverEvent = {
      body: envelope.body,
      ack: reply.ack,
      ...(envelope.retry_num !== undefined ? { retryNum: envelope.retry_num } : {}),
      ...(envelope.retry_reason !== undefined ? { retryReason: envelope.retry_reason } : {}),
    };
    const processed = app.processEvent(event).catch(async (error: unknown) => {
      const logger = this.opts.logger;
      const err = error instanceof Error ? error : new Error(errorMessage(error));
      // Bolt's own rule: an authorization error is acked, so that Slack stops sending it again.
      if (await defaultProcessEventErrorHandler({ error: err, logger, event })) await event.ack();
    });
    if (held) await settleWithin(processed, this.opts.ackWaitMs);
    else await processed;
    await reply.release();
  }

  /**
   * The client reconnects by itself, but when a reconnect fails for good (the
   * app token revoked, say) its promise rejects with nobody listening, which
   * would take the whole daemon down. This catches that, reports it, and
   * tries again later. (The client's reconnect calls `this.start` on itself,
   * so the instance's own start is the one to wrap.)
   */
  private guardReconnects(): void {
    const client = this.client;
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

/**
 * The ack Bolt hands the app for one envelope: sent on the socket when called, or, while held, only
 * recorded then and sent on `release()`. Acked once; a second call is ignored with a warning, as
 * Bolt's own.
 */
class EnvelopeAck {
  private response: Record<string, unknown> | undefined;
  private acked = false;

  constructor(
    private readonly envelope: SocketEnvelope,
    private held: boolean,
    private readonly logger: SlackLogger,
  ) {}

  readonly ack = async (response?: Record<string, unknown>): Promise<void> => {
    if (this.acked) {
      this.logger.warn("ack() has already been called. Additional calls will be ignored.");
      return;
    }
    this.acked = true;
    this.response = response;
    if (!this.held) await this.envelope.ack(response);
  };

  /** Sends the ack the app gave while held; an ack that comes later goes out at once. */
  async release(): Promise<void> {
    if (!this.held) return;
    this.held = false;
    if (this.acked) await this.envelope.ack(this.response);
  }
}
