/**
 * Slack → mapped messages: @slack/bolt with Socket Mode (default) or the HTTP
 * Events API, and the decisions that need the network before a message can be
 * handed on (is the bot part of this thread? the sender's username for
 * allowFrom). Messages of one Slack channel are handed on in the order they
 * arrived; what happens to them then (the gate, downloads) is the inbound
 * path's business.
 *
 * The Web API base (`apiUrl`) reaches both the reads client and the Socket
 * Mode client, which asks apps.connections.open for its WebSocket URL, so one
 * setting points everything at a fake in tests or at a proxy.
 */
import type { AddressInfo } from "node:net";
import { App, HTTPReceiver, SocketModeReceiver, type webApi } from "@slack/bolt";
import type { Logger } from "../../log.js";
import { backoffDelay } from "../../util/backoff.js";
import { BoundedMap } from "../../util/bounded-map.js";
import { ChannelError, errorMessage } from "../../util/errors.js";
import { KeyedQueue } from "../../util/keyed-queue.js";
import { TaskSet } from "../../util/task-set.js";
import { settleWithin, TimeoutError, untilAborted, withTimeout } from "../../util/timeout.js";
import type { ChoiceClick } from "../types.js";
import type { SlackConfig } from "./config.js";
import { BAD_TOKEN, platformError } from "./errors.js";
import { slackLogger } from "./logger.js";
import {
  eventKey,
  isDirect,
  mapCommand,
  mapMessage,
  mentions,
  routeEvent,
  SlackCommandSchema,
  SlackMessageEventSchema,
  type BotIdentity,
  type MappedMessage,
  type SlackMessageEvent,
  type SlackPolicy,
} from "./mapping.js";
import { clickOf, pressOf, type SlackPress } from "./questions.js";

export type WebClient = InstanceType<typeof webApi.WebClient>;

export interface ReceiverTuning {
  /** Socket Mode: wait for a pong this long; reconnects wait this long times the failures in a row. */
  clientPingTimeoutMs?: number;
  /** Socket Mode: reconnect when Slack's pings stop for this long. */
  serverPingTimeoutMs?: number;
  /** One Web API request. */
  requestTimeoutMs?: number;
  /** How long start() waits for Socket Mode's hello before giving up. */
  startTimeoutMs?: number;
  /** Socket Mode: first wait before trying again when a reconnect failed for good (doubles, up to 5 min). */
  reconnectRetryMs?: number;
  /** HTTP mode: the interface to listen on (default all, as Slack must reach it). */
  httpHost?: string;
}

export interface SlackReceiverOptions {
  tuning: ReceiverTuning;
  config: SlackConfig;
  policy: SlackPolicy;
  /** "" for Slack's own. */
  apiUrl: string;
  /** The client for reads (auth.test, conversations.replies, users.info): it waits out rate limits. */
  reads: WebClient;
  log: Logger;
  /** A message for the bot (routed, its thread checked, its sender named), in order per Slack channel. */
  onMessage(msg: MappedMessage): void;
  /** A press on one of palaver's buttons, already acknowledged to Slack, its presser named. */
  onChoice(click: ChoiceClick, press: SlackPress): Promise<void>;
}

const STOP_WAIT_MS = 5000;

export class SlackReceiver {
  private app: App | undefined;
  private socket: SocketModeReceiver | undefined;
  private http: HTTPReceiver | undefined;
  private httpAddress: AddressInfo | undefined;
  private bot: BotIdentity | undefined;
  private lifetime = new AbortController();
  private reconnectTimer: NodeJS.Timeout | undefined;
  /** The lookups before a message is handed on, one Slack channel at a time. */
  private readonly queue = new KeyedQueue();
  private readonly tasks = new TaskSet();

  /** Messages already taken (`message` and `app_mention` of one message, Slack's retries). */
  private readonly seen = new BoundedMap<string, true>(5000);
  /** Threads the bot is part of (true) or found not to be (false). */
  private readonly threads = new BoundedMap<string, boolean>(5000, 6 * 60 * 60 * 1000);
  /** The thread each user last talked to the bot in, per channel: where their slash commands go. */
  private readonly recentThreads = new BoundedMap<string, string>(5000, 12 * 60 * 60 * 1000);
  private readonly userNames = new BoundedMap<string, string | null>(5000, 60 * 60 * 1000);
  private userLookup = true;

  constructor(private readonly opts: SlackReceiverOptions) {}

  /** HTTP mode: where the Events API server listens (port 0 in the config picks a free one). */
  get address(): AddressInfo | undefined {
    return this.httpAddress;
  }

  get running(): boolean {
    return this.app !== undefined;
  }

  /** Checks the bot token, then connects (Socket Mode) or listens (HTTP). */
  async start(signal: AbortSignal): Promise<BotIdentity> {
    this.lifetime = new AbortController();
    // The Web API client retries an unreachable Slack for a minute or more and takes no signal: a
    // stop must not wait for that (the gateway took 47 s to exit with Slack unreachable).
    const bot = await untilAborted(this.verifyBotToken(), signal);
    this.bot = bot;
    const app = this.buildApp(bot);
    try {
      await this.startReceiver(app, signal);
    } catch (err) {
      await this.shutdownReceivers();
      throw err;
    }
    this.app = app;
    return bot;
  }

  async stop(): Promise<void> {
    this.lifetime.abort();
    clearTimeout(this.reconnectTimer);
    this.app = undefined;
    await this.shutdownReceivers();
    await this.tasks.settle(STOP_WAIT_MS);
  }

  /** The bot posted in this thread: later replies in it are for the bot without a mention. */
  noteBotThread(channel: string, threadTs: string): void {
    this.threads.set(`${channel}:${threadTs}`, true);
  }

  // ---------------------------------------------------------------------------
  // Connecting

  private async verifyBotToken(): Promise<BotIdentity> {
    try {
      const auth = await this.opts.reads.auth.test();
      if (!auth.user_id) throw new ChannelError("Slack's auth.test did not name the bot user");
      return {
        userId: auth.user_id,
        ...(auth.bot_id ? { botId: auth.bot_id } : {}),
        ...(auth.team_id ? { teamId: auth.team_id } : {}),
      };
    } catch (err) {
      const code = platformError(err);
      if (code && BAD_TOKEN.has(code)) {
        throw new ChannelError(`the Slack bot token was rejected (check channels.slack.botToken): ${code}`, {
          cause: err,
        });
      }
      if (err instanceof ChannelError) throw err;
      throw new ChannelError(
        `cannot reach Slack's Web API at ${this.opts.apiUrl || "https://slack.com/api/"}: ${errorMessage(err)}`,
        { cause: err },
      );
    }
  }

  private buildApp(bot: BotIdentity): App {
    const { config } = this.opts;
    const logger = slackLogger(this.opts.log.child({ sdk: "bolt" }));
    const clientOptions = {
      ...(this.opts.apiUrl ? { slackApiUrl: this.opts.apiUrl } : {}),
      timeout: this.opts.tuning.requestTimeoutMs ?? 30_000,
    };
    let receiver: SocketModeReceiver | HTTPReceiver;
    if (config.mode === "socket") {
      this.socket = new SocketModeReceiver({
        appToken: config.appToken,
        logger,
        clientPingTimeout: this.opts.tuning.clientPingTimeoutMs ?? 5000,
        serverPingTimeout: this.opts.tuning.serverPingTimeoutMs ?? 30_000,
        // The Socket Mode client calls apps.connections.open with these; its own retry policy stays.
        installerOptions: { clientOptions },
      });
      receiver = this.socket;
    } else {
      this.http = new HTTPReceiver({
        signingSecret: config.signingSecret,
        endpoints: config.path,
        logger,
        processBeforeResponse: false,
      });
      receiver = this.http;
    }
    const app = new App({
      token: config.botToken,
      botUserId: bot.userId,
      // Both ids given, Bolt calls no auth.test of its own (a failure there would be an unhandled rejection).
      botId: bot.botId ?? "",
      receiver,
      logger,
      clientOptions,
      convoStore: false,
    });
    app.event("message", ({ event }) => Promise.resolve(this.onEvent(event)));
    app.event("app_mention", ({ event }) => Promise.resolve(this.onEvent(event)));
    // Every slash command of the app is palaver's (the manifest names it /palaver; people may rename it).
    app.command(/.*/, async ({ command, ack }) => {
      await ack();
      this.onCommand(command);
    });
    // Every interaction is acknowledged first (Slack shows the presser an error after 3 s without);
    // those that are not presses on a question's buttons are then ignored.
    app.action(/.*/, async ({ ack, body }) => {
      await ack();
      this.onAction(body);
    });
    app.error((err) => {
      this.opts.log.error({ err }, "Slack event handling failed");
      return Promise.resolve();
    });
    return app;
  }

  private async startReceiver(app: App, signal: AbortSignal): Promise<void> {
    if (this.socket) {
      await this.connectSocket(app, this.socket, signal);
      return;
    }
    const port = this.opts.config.port;
    try {
      const server = await app.start({
        port,
        ...(this.opts.tuning.httpHost ? { host: this.opts.tuning.httpHost } : {}),
      });
      this.httpAddress = server.address() as AddressInfo;
    } catch (err) {
      throw new ChannelError(
        `cannot listen for Slack events on port ${port} (channels.slack.port): ${errorMessage(err)}`,
        { cause: err },
      );
    }
  }

  private async connectSocket(app: App, socket: SocketModeReceiver, signal: AbortSignal): Promise<void> {
    const timeoutMs = this.opts.tuning.startTimeoutMs ?? 30_000;
    try {
      await withTimeout(app.start(), timeoutMs, "connecting to Slack Socket Mode", signal);
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
    this.guardReconnects(socket);
  }

  /**
   * The Socket Mode client reconnects by itself, but when a reconnect fails
   * for good (the app token revoked, say) its promise rejects with nobody
   * listening, which would take the whole daemon down. This catches that,
   * reports it, and tries again later.
   */
  private guardReconnects(receiver: SocketModeReceiver): void {
    const client = receiver.client;
    const connect = client.start.bind(client);
    let failures = 0;
    const attempt = async (): Promise<Awaited<ReturnType<typeof connect>>> => {
      try {
        const result = await connect();
        failures = 0;
        return result;
      } catch (err) {
        failures++;
        const delayMs = backoffDelay(failures - 1, this.opts.tuning.reconnectRetryMs ?? 30_000, 300_000);
        this.opts.log.error({ err, retryInMs: Math.round(delayMs) }, "Slack Socket Mode could not reconnect");
        if (!this.lifetime.signal.aborted) {
          clearTimeout(this.reconnectTimer);
          this.reconnectTimer = setTimeout(() => void attempt(), delayMs);
        }
        // Nobody reads this result (the SDK's reconnect path ignores it); an empty response stands in.
        return { ok: false };
      }
    };
    client.start = attempt;
  }

  private async shutdownReceivers(): Promise<void> {
    const socket = this.socket;
    const http = this.http;
    this.socket = undefined;
    this.http = undefined;
    this.httpAddress = undefined;
    if (socket) {
      // Bolt's SocketModeReceiver.stop() does not wait for the socket to close; the client's disconnect() does.
      await settleWithin(
        socket.client
          .disconnect()
          .catch((err: unknown) => this.opts.log.warn({ err }, "Socket Mode disconnect failed")),
        STOP_WAIT_MS,
      );
    }
    if (http) {
      await http
        .stop()
        .catch((err: unknown) => this.opts.log.debug({ err }, "HTTP receiver was not running"));
    }
  }

  // ---------------------------------------------------------------------------
  // Receiving

  private onEvent(raw: unknown): void {
    const bot = this.bot;
    const parsed = SlackMessageEventSchema.safeParse(raw);
    if (!bot || !parsed.success) return;
    const event = parsed.data;
    const key = eventKey(event);
    if (this.seen.has(key)) return;
    const known = event.thread_ts ? this.threads.get(`${event.channel}:${event.thread_ts}`) : undefined;
    const route = routeEvent(event, bot, this.opts.policy, known);
    if (route.kind === "ignore") {
      this.opts.log.debug(
        { channel: event.channel, ts: event.ts, why: route.why },
        "Slack message not taken",
      );
      return;
    }
    this.seen.set(key, true);
    this.inOrder(event.channel, () => this.handOn(event, bot, route.kind === "checkThread"));
  }

  private async handOn(event: SlackMessageEvent, bot: BotIdentity, checkThread: boolean): Promise<void> {
    if (checkThread && !(await this.botInThread(event.channel, event.thread_ts ?? event.ts, bot))) {
      this.opts.log.debug(
        { channel: event.channel, ts: event.ts },
        "thread reply in a thread without the bot",
      );
      return;
    }
    // A read, nothing the sender sees: allowFrom may name people by username, so the gate needs it.
    const senderName = event.user ? await this.userName(event.user) : undefined;
    const mapped = mapMessage(event, bot, this.opts.policy, senderName ? { senderName } : {});
    if (!mapped) return;
    if (mapped.threadTs && !isDirect(event)) {
      this.noteBotThread(event.channel, mapped.threadTs);
      if (event.user) this.recentThreads.set(`${event.channel}:${event.user}`, mapped.threadTs);
    }
    this.opts.onMessage(mapped);
  }

  private onCommand(raw: unknown): void {
    const parsed = SlackCommandSchema.safeParse(raw);
    if (!parsed.success) {
      this.opts.log.warn({ issues: parsed.error.issues }, "unexpected Slack slash command payload");
      return;
    }
    const cmd = parsed.data;
    const recent = this.recentThreads.get(`${cmd.channel_id}:${cmd.user_id}`);
    this.inOrder(cmd.channel_id, async () => {
      // The payload's user_name is not trusted as an alias: it is looked up like any sender's.
      const senderName = await this.userName(cmd.user_id);
      this.opts.onMessage(mapCommand(cmd, recent, senderName));
    });
  }

  private onAction(payload: unknown): void {
    const press = pressOf(payload);
    if (!press) {
      this.opts.log.debug("Slack interaction that is not a question's button; ignored");
      return;
    }
    void this.tasks.add(
      this.handOnPress(press).catch((err: unknown) =>
        this.opts.log.error({ err, channel: press.chatId }, "handling a Slack button press failed"),
      ),
    );
  }

  private async handOnPress(press: SlackPress): Promise<void> {
    // Named like a message's sender (the payload's username is not trusted), for allowFrom and approvers.
    const senderName = await this.userName(press.userId);
    await this.opts.onChoice(clickOf(press, senderName), press);
  }

  private inOrder(channel: string, work: () => Promise<void>): void {
    void this.tasks.add(
      this.queue
        .run(channel, work)
        .catch((err: unknown) => this.opts.log.error({ err, channel }, "handling a Slack message failed")),
    );
  }

  /** Whether the bot wrote in, or was mentioned in, this thread (conversations.replies, first page). */
  private async botInThread(channel: string, threadTs: string, bot: BotIdentity): Promise<boolean> {
    let involved = false;
    try {
      const res = await this.opts.reads.conversations.replies({ channel, ts: threadTs, limit: 200 });
      involved = (res.messages ?? []).some(
        (m) =>
          m.user === bot.userId ||
          (bot.botId !== undefined && m.bot_id === bot.botId) ||
          mentions(m.text ?? "", bot.userId),
      );
    } catch (err) {
      this.opts.log.warn(
        { err, channel },
        "could not read the thread (conversations.replies); not answering in it",
      );
    }
    this.threads.set(`${channel}:${threadTs}`, involved);
    return involved;
  }

  /** The sender's username, for allowFrom by name; looked up once an hour at most, never required. */
  private async userName(user: string): Promise<string | undefined> {
    const cached = this.userNames.get(user);
    if (cached !== undefined) return cached ?? undefined;
    if (!this.userLookup) return undefined;
    try {
      const res = await this.opts.reads.users.info({ user });
      // Only members of the bot's own workspace: a Slack Connect guest may share a username with someone allowed here.
      const member = res.user && !res.user.deleted && res.user.team_id === this.bot?.teamId;
      const name = (member ? res.user?.name : undefined) ?? null;
      this.userNames.set(user, name);
      return name ?? undefined;
    } catch (err) {
      if (platformError(err) === "missing_scope") {
        this.userLookup = false;
        this.opts.log.info("no users:read scope: Slack senders are known by id only");
      } else {
        this.opts.log.debug({ err, user }, "users.info failed");
      }
      this.userNames.set(user, null);
      return undefined;
    }
  }
}
