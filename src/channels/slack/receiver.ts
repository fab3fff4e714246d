/**
 * Slack → mapped messages, on @slack/bolt: an `App` with a Socket Mode
 * receiver of palaver's own (default, socket.ts) or Bolt's HTTP receiver (http-server.ts serves
 * its request listener), `app.event` for messages and mentions, `app.command`
 * for the slash command and `app.action` for the question buttons. Every
 * delivery is acknowledged before it is handled; in cluster mode an event is
 * acknowledged only once it is handed on (stored), so an instance killed
 * right after the ack loses nothing. This decides what needs the
 * network before a message can be handed on (is the bot part of this thread?
 * the sender's username for allowFrom) and drops a message taken already
 * (Slack's retries, a message seen as both `message` and `app_mention`).
 * Messages of one Slack channel are handed on in the order they arrived; what
 * happens to them then (the gate, downloads) is the inbound path's business.
 *
 * The Web API base (`apiUrl`) reaches the app's client, the reads client and
 * the Socket Mode client, which asks apps.connections.open for its WebSocket
 * URL, so one setting points everything at a fake in tests or at a proxy.
 */
import type { AddressInfo } from "node:net";
import { App, HTTPReceiver, type AnyMiddlewareArgs, type Receiver, type webApi } from "@slack/bolt";
import type { Logger } from "../../log.js";
import { BoundedMap } from "../../util/bounded-map.js";
import { ChannelError, errorMessage } from "../../util/errors.js";
import { KeyedQueue } from "../../util/keyed-queue.js";
import { TaskSet } from "../../util/task-set.js";
import { settleWithin, untilAborted } from "../../util/timeout.js";
import type { ChoiceClick } from "../types.js";
import type { SlackConfig } from "../../config/platforms/slack.js";
import { BAD_TOKEN, platformError } from "./errors.js";
import { SlackHttpServer } from "./http-server.js";
import type { SlackLogger } from "./logger.js";
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
import { SlackSocket } from "./socket.js";

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
  /** Cluster mode: the longest an event's acknowledgement waits for its hand-on (default ACK_WAIT_MS). */
  ackWaitMs?: number;
}

export interface SlackReceiverOptions {
  tuning: ReceiverTuning;
  config: SlackConfig;
  policy: SlackPolicy;
  /** "" for Slack's own. */
  apiUrl: string;
  /** The client for reads (auth.test, conversations.replies, users.info): it waits out rate limits. */
  reads: WebClient;
  /** The app's client (`app.client`): the adapter's writes. */
  clientOptions: webApi.WebClientOptions;
  /** Bolt's logger (logger.ts), secrets scrubbed. */
  logger: SlackLogger;
  log: Logger;
  /**
   * A message for the bot (routed, its thread checked, its sender named), in order per Slack channel.
   * A promise: the event is acknowledged once it settles (`ackAfterHandOn`), at most ackWaitMs
   * after it arrived.
   */
  onMessage(msg: MappedMessage): void | Promise<void>;
  /**
   * Acknowledge an event only once it is handed on (cluster mode: stored in the queue), so Slack's
   * next delivery to another instance cannot overtake it and an instance killed right after the ack
   * loses nothing (HTTP: the response; Socket Mode: the envelope's ack). Asked when it connects.
   */
  ackAfterHandOn?: () => boolean;
  /** A press on one of palaver's buttons, already acknowledged to Slack, its presser named. */
  onChoice(click: ChoiceClick, press: SlackPress): Promise<void>;
}

const STOP_WAIT_MS = 5000;
/** The longest an event's acknowledgement waits for its hand-on: well inside Slack's 3 s. */
const ACK_WAIT_MS = 2000;

export class SlackReceiver {
  /** Built by the first start, once the bot token is known good; kept after a stop for late writes. */
  private app: App | undefined;
  private socket: SlackSocket | undefined;
  private http: SlackHttpServer | undefined;
  private started = false;
  private bot: BotIdentity | undefined;
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
    return this.http?.address;
  }

  get running(): boolean {
    return this.started;
  }

  /** The app's Web API client (`app.client`); none before the first start. */
  get client(): WebClient | undefined {
    return this.app?.client;
  }

  /** Checks the bot token, then connects (Socket Mode) or listens (HTTP). */
  async start(signal: AbortSignal): Promise<BotIdentity> {
    // The Web API client retries an unreachable Slack for a minute or more and takes no signal: a
    // stop must not wait for that (the gateway took 47 s to exit with Slack unreachable).
    const bot = await untilAborted(this.verifyBotToken(), signal);
    this.bot = bot;
    try {
      await this.listen(bot, signal);
    } catch (err) {
      await this.shutdownReceivers();
      throw err;
    }
    this.started = true;
    return bot;
  }

  async stop(): Promise<void> {
    this.started = false;
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

  private async listen(bot: BotIdentity, signal: AbortSignal): Promise<void> {
    const { config, tuning, log, logger } = this.opts;
    if (config.mode === "socket") {
      const socket = new SlackSocket({
        appToken: config.appToken,
        clientOptions: {
          ...(this.opts.apiUrl ? { slackApiUrl: this.opts.apiUrl } : {}),
          timeout: tuning.requestTimeoutMs ?? 30_000,
        },
        clientPingTimeoutMs: tuning.clientPingTimeoutMs ?? 5000,
        serverPingTimeoutMs: tuning.serverPingTimeoutMs ?? 30_000,
        reconnectRetryMs: tuning.reconnectRetryMs ?? 30_000,
        ackAfterHandOn: this.opts.ackAfterHandOn?.() ?? false,
        ackWaitMs: tuning.ackWaitMs ?? ACK_WAIT_MS,
        logger,
        log,
      });
      this.socket = socket;
      const app = this.buildApp(bot, socket);
      await socket.connect(() => app.start(), tuning.startTimeoutMs ?? 30_000, signal);
      return;
    }
    const receiver = new HTTPReceiver({
      signingSecret: config.signingSecret,
      endpoints: config.path,
      logger,
      // Acknowledged first, handled after (Slack wants the answer within 3 s); in a cluster after the
      // hand-on, which is bounded (ackWaitMs).
      processBeforeResponse: this.opts.ackAfterHandOn?.() ?? false,
    });
    this.buildApp(bot, receiver);
    this.http = new SlackHttpServer({
      listener: receiver.requestListener,
      path: config.path,
      port: config.port,
      ...(tuning.httpHost ? { host: tuning.httpHost } : {}),
      log,
    });
    await this.http.start();
  }

  private buildApp(bot: BotIdentity, receiver: Receiver): App {
    const app = new App({
      token: this.opts.config.botToken,
      botUserId: bot.userId,
      // Both ids given, Bolt calls no auth.test of its own (its failure would be an unhandled rejection).
      botId: bot.botId ?? "",
      receiver,
      logger: this.opts.logger,
      clientOptions: this.opts.clientOptions,
      // palaver keeps its conversations in sessions; Bolt's conversation store is not used.
      convoStore: false,
    });
    // Every delivery Bolt leaves to the app (commands, interactions, options) is acknowledged first,
    // with nothing: Slack shows the user an error after 3 s without. Events Bolt acks itself.
    app.use(async (args) => {
      const ack = ackOf(args);
      if (ack) await ack();
      await args.next();
    });
    app.event("message", ({ event }) => this.onEvent(event));
    app.event("app_mention", ({ event }) => this.onEvent(event));
    // Every slash command of the app is palaver's (the manifest names it /palaver; people may rename it).
    app.command(/.*/, ({ command }) => Promise.resolve(this.onCommand(command)));
    // Presses on a question's buttons; any other action was acknowledged and is ignored.
    app.action({ type: "block_actions" }, ({ body }) => Promise.resolve(this.onAction(body)));
    app.error((err) => {
      this.opts.log.error({ err }, "Slack event handling failed");
      return Promise.resolve();
    });
    this.app = app;
    return app;
  }

  private async shutdownReceivers(): Promise<void> {
    const socket = this.socket;
    const http = this.http;
    this.socket = undefined;
    this.http = undefined;
    await socket?.close(STOP_WAIT_MS);
    await http?.stop(STOP_WAIT_MS);
  }

  // ---------------------------------------------------------------------------
  // Receiving

  /** Resolves once the event is handed on (or ackWaitMs passed): Bolt acknowledges it then when asked to. */
  private async onEvent(raw: unknown): Promise<void> {
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
    const handedOn = this.inOrder(event.channel, () => this.handOn(event, bot, route.kind === "checkThread"));
    await settleWithin(handedOn, this.opts.tuning.ackWaitMs ?? ACK_WAIT_MS);
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
    await this.opts.onMessage(mapped);
  }

  private onCommand(raw: unknown): void {
    const parsed = SlackCommandSchema.safeParse(raw);
    if (!parsed.success) {
      this.opts.log.warn({ issues: parsed.error.issues }, "unexpected Slack slash command payload");
      return;
    }
    const cmd = parsed.data;
    const recent = this.recentThreads.get(`${cmd.channel_id}:${cmd.user_id}`);
    void this.inOrder(cmd.channel_id, async () => {
      // The payload's user_name is not trusted as an alias: it is looked up like any sender's.
      const senderName = await this.userName(cmd.user_id);
      await this.opts.onMessage(mapCommand(cmd, recent, senderName));
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

  private inOrder(channel: string, work: () => Promise<void>): Promise<void> {
    return this.tasks.add(
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

/** The ack Bolt hands the app for this delivery, if it is the app's to send (not an event's). */
function ackOf(args: AnyMiddlewareArgs): (() => Promise<void>) | undefined {
  return "ack" in args && typeof args.ack === "function" ? () => args.ack() : undefined;
}
