/**
 * The Slack channel: @slack/bolt wiring only. Socket Mode (default) or the
 * HTTP Events API receives; the Web API sends. What to take and how to
 * write it is decided in mapping.ts and format.ts.
 *
 * The Web API base (`apiUrl`) reaches both the bot's client and the Socket
 * Mode client, which asks apps.connections.open for its WebSocket URL, so one
 * setting points everything at a fake in tests or at a proxy.
 */
import { readFile, rm } from "node:fs/promises";
import { reservedForm } from "../inbound.js";
import type { AddressInfo } from "node:net";
import { basename } from "node:path";
import { App, HTTPReceiver, SocketModeReceiver, webApi } from "@slack/bolt";
import type { OutboundMessage } from "../../bus/types.js";
import type { Logger } from "../../log.js";
import { backoffDelay } from "../../util/backoff.js";
import { ChannelError, errorMessage } from "../../util/errors.js";
import { isAllowed } from "../access.js";
import { downloadFile, MediaTooLargeError, mediaPath } from "../media.js";
import type { ChannelFactoryContext } from "../registry.js";
import type { Channel, InboundSink } from "../types.js";
import { BoundedMap } from "../../util/bounded-map.js";
import type { SlackConfig } from "./config.js";
import { formatSlackMessage } from "./format.js";
import { slackLogger } from "./logger.js";
import {
  CHANNEL_NAME,
  eventKey,
  fileNameOf,
  isDirect,
  isSlackFileUrl,
  mentions,
  replyThreadOf,
  routeEvent,
  slashCommandToInbound,
  SlackCommandSchema,
  SlackMessageEventSchema,
  threadTsFrom,
  toInbound,
  type BotIdentity,
  type SlackFile,
  type SlackMessageEvent,
  type SlackPolicy,
} from "./mapping.js";

type WebClient = InstanceType<typeof webApi.WebClient>;
type RetryOptions = NonNullable<ConstructorParameters<typeof webApi.WebClient>[1]>["retryConfig"];

/** Tuning the config does not expose; tests make it fast. */
export interface SlackTuning {
  /** Socket Mode: wait for a pong this long; reconnects wait this long times the failures in a row. */
  clientPingTimeoutMs?: number;
  /** Socket Mode: reconnect when Slack's pings stop for this long. */
  serverPingTimeoutMs?: number;
  /** Web API retries (network errors, 429 after its Retry-After wait). */
  retryConfig?: RetryOptions;
  /** One Web API request. */
  requestTimeoutMs?: number;
  /** How long start() waits for Socket Mode's hello before giving up. */
  startTimeoutMs?: number;
  /** One attachment download. */
  downloadTimeoutMs?: number;
  /** Socket Mode: first wait before trying again when a reconnect failed for good (doubles, up to 5 min). */
  reconnectRetryMs?: number;
  /** HTTP mode: the interface to listen on (default all, as Slack must reach it). */
  httpHost?: string;
}

export interface SlackChannelOptions extends SlackTuning {
  config: SlackConfig;
  workspace: string;
  maxMediaBytes: number;
  log: Logger;
}

const DEFAULT_RETRY: RetryOptions = {
  retries: 5,
  factor: 2,
  minTimeout: 1000,
  maxTimeout: 30_000,
  randomize: true,
};
const BAD_TOKEN = new Set([
  "invalid_auth",
  "not_authed",
  "account_inactive",
  "token_revoked",
  "token_expired",
  "not_allowed_token_type",
  "team_disabled",
]);
const MAX_FILES = 10;
const STOP_WAIT_MS = 5000;

/** The registry's factory: `slack: async (ctx) => (await import("./slack/adapter.js")).createSlackChannel(ctx)`. */
export async function createSlackChannel(
  ctx: ChannelFactoryContext,
  tuning: SlackTuning = {},
): Promise<Channel> {
  return Promise.resolve(
    new SlackChannel({
      config: ctx.config.channels.slack,
      workspace: ctx.workspace,
      maxMediaBytes: ctx.config.channels.maxMediaBytes,
      log: ctx.log.child({ channel: CHANNEL_NAME }),
      ...tuning,
    }),
  );
}

export class SlackChannel implements Channel {
  readonly name = CHANNEL_NAME;
  private readonly config: SlackConfig;
  private readonly log: Logger;
  private readonly web: WebClient;
  private readonly apiUrl: string;
  private readonly policy: SlackPolicy;

  private app: App | undefined;
  private socket: SocketModeReceiver | undefined;
  private http: HTTPReceiver | undefined;
  private httpAddress: AddressInfo | undefined;
  private sink: InboundSink | undefined;
  private bot: BotIdentity | undefined;
  private lifetime = new AbortController();
  private reconnectTimer: NodeJS.Timeout | undefined;

  /** Messages already taken (`message` and `app_mention` of one message, Slack's retries). */
  private readonly seen = new BoundedMap<string, true>(5000);
  /** Threads the bot is part of (true) or found not to be (false). */
  private readonly threads = new BoundedMap<string, boolean>(5000, 6 * 60 * 60 * 1000);
  /** The thread each user last talked to the bot in, per channel: where their slash commands go. */
  private readonly recentThreads = new BoundedMap<string, string>(5000, 12 * 60 * 60 * 1000);
  private readonly userNames = new BoundedMap<string, string | null>(5000, 60 * 60 * 1000);
  private userLookup = true;
  /** Receipt reactions waiting for the reply, by `channel:ts`: the reactions.add call in flight. */
  private readonly pendingReactions = new BoundedMap<string, Promise<boolean>>(5000, 24 * 60 * 60 * 1000);
  /** Per-channel tail of event handling, so one chat's messages reach the bus in order. */
  private readonly chains = new Map<string, Promise<void>>();
  private readonly tasks = new Set<Promise<unknown>>();

  constructor(private readonly opts: SlackChannelOptions) {
    const config = opts.config;
    this.config = config;
    this.log = opts.log;
    checkConfig(config);
    if (config.dm?.policy === "allowlist" && config.dm.allowFrom.length) {
      this.log.warn(
        "channels.slack.dm.allowFrom is nanobot's; palaver lets people in by channels.slack.allowFrom only: " +
          "add these ids there",
      );
    }
    this.apiUrl = normalizeApiUrl(config.apiUrl);
    this.policy = {
      groupPolicy: config.groupPolicy,
      groupAllowFrom: config.groupAllowFrom,
      replyInThread: config.replyInThread,
      dmEnabled: config.dm?.enabled ?? true,
    };
    this.web = new webApi.WebClient(config.botToken, {
      ...(this.apiUrl ? { slackApiUrl: this.apiUrl } : {}),
      logger: slackLogger(this.log.child({ sdk: "web-api" })),
      retryConfig: opts.retryConfig ?? DEFAULT_RETRY,
      timeout: opts.requestTimeoutMs ?? 30_000,
    });
  }

  /** HTTP mode: where the Events API server listens (port 0 in the config picks a free one). */
  get address(): AddressInfo | undefined {
    return this.httpAddress;
  }

  async start(sink: InboundSink, signal: AbortSignal): Promise<void> {
    if (this.app) return;
    this.sink = sink;
    this.lifetime = new AbortController();
    this.bot = await this.verifyBotToken();
    const app = this.buildApp(this.bot);
    try {
      await this.startReceiver(app, signal);
    } catch (err) {
      await this.shutdownReceivers();
      throw err;
    }
    this.app = app;
    this.log.info(
      {
        mode: this.config.mode,
        botUserId: this.bot.userId,
        ...(this.httpAddress ? { port: this.httpAddress.port } : {}),
      },
      this.config.mode === "socket" ? "connected to Slack (Socket Mode)" : "listening for Slack events",
    );
  }

  async stop(): Promise<void> {
    this.lifetime.abort();
    clearTimeout(this.reconnectTimer);
    this.app = undefined;
    await this.shutdownReceivers();
    await withTimeout(Promise.allSettled([...this.tasks]), STOP_WAIT_MS);
  }

  async send(msg: OutboundMessage): Promise<void> {
    const channel = msg.chatId;
    const threadTs = threadTsFrom(msg.metadata);
    for (const text of formatSlackMessage(msg.content)) {
      const res = await this.call("chat.postMessage", () =>
        this.web.chat.postMessage({ channel, text, ...(threadTs ? { thread_ts: threadTs } : {}) }),
      );
      // Replies under the bot's messages are in a thread the bot is part of.
      const thread = threadTs ?? res.ts;
      if (thread) this.threads.set(`${channel}:${thread}`, true);
    }
    const failed: string[] = [];
    for (const path of msg.media ?? []) {
      try {
        await this.upload(channel, threadTs, path);
      } catch (err) {
        this.log.error({ err, channel, path }, "file upload to Slack failed");
        failed.push(`${basename(path)} (${errorMessage(err)})`);
      }
    }
    if (failed.length) {
      await this.web.chat
        .postMessage({
          channel,
          text: `Could not attach ${failed.join(", ")}.`,
          ...(threadTs ? { thread_ts: threadTs } : {}),
        })
        .catch((err: unknown) => this.log.warn({ err, channel }, "could not report the failed upload"));
    }
    if ((msg.kind ?? "final") === "final") await this.markDone(channel, msg.metadata?.messageId);
  }

  // ---------------------------------------------------------------------------
  // Connecting

  private async verifyBotToken(): Promise<BotIdentity> {
    try {
      const auth = await this.web.auth.test();
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
        `cannot reach Slack's Web API at ${this.apiUrl || "https://slack.com/api/"}: ${errorMessage(err)}`,
        { cause: err },
      );
    }
  }

  private buildApp(bot: BotIdentity): App {
    const logger = slackLogger(this.log.child({ sdk: "bolt" }));
    const clientOptions = {
      ...(this.apiUrl ? { slackApiUrl: this.apiUrl } : {}),
      timeout: this.opts.requestTimeoutMs ?? 30_000,
    };
    let receiver: SocketModeReceiver | HTTPReceiver;
    if (this.config.mode === "socket") {
      this.socket = new SocketModeReceiver({
        appToken: this.config.appToken,
        logger,
        clientPingTimeout: this.opts.clientPingTimeoutMs ?? 5000,
        serverPingTimeout: this.opts.serverPingTimeoutMs ?? 30_000,
        // The Socket Mode client calls apps.connections.open with these; its own retry policy stays.
        installerOptions: { clientOptions },
      });
      receiver = this.socket;
    } else {
      this.http = new HTTPReceiver({
        signingSecret: this.config.signingSecret,
        endpoints: this.config.path,
        logger,
        processBeforeResponse: false,
      });
      receiver = this.http;
    }
    const app = new App({
      token: this.config.botToken,
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
    app.error((err) => {
      this.log.error({ err }, "Slack event handling failed");
      return Promise.resolve();
    });
    return app;
  }

  private async startReceiver(app: App, signal: AbortSignal): Promise<void> {
    const timeoutMs = this.opts.startTimeoutMs ?? 30_000;
    if (this.socket) {
      try {
        await withDeadline(app.start(), timeoutMs, signal, () => {
          return new ChannelError(
            `Slack Socket Mode did not connect within ${Math.round(timeoutMs / 1000)} s`,
          );
        });
      } catch (err) {
        const code = platformError(err);
        if (code && BAD_TOKEN.has(code)) {
          throw new ChannelError(
            "the Slack app-level token was rejected (check channels.slack.appToken: an xapp- token " +
              `with the connections:write scope, and Socket Mode enabled for the app): ${code}`,
            { cause: err },
          );
        }
        if (err instanceof ChannelError) throw err;
        throw new ChannelError(`Slack Socket Mode could not connect: ${errorMessage(err)}`, { cause: err });
      }
      this.guardReconnects(this.socket);
      return;
    }
    try {
      const server = await app.start({
        port: this.config.port,
        ...(this.opts.httpHost ? { host: this.opts.httpHost } : {}),
      });
      this.httpAddress = server.address() as AddressInfo;
    } catch (err) {
      throw new ChannelError(
        `cannot listen for Slack events on port ${this.config.port} (channels.slack.port): ${errorMessage(err)}`,
        { cause: err },
      );
    }
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
        const delayMs = backoffDelay(failures - 1, this.opts.reconnectRetryMs ?? 30_000, 300_000);
        this.log.error({ err, retryInMs: Math.round(delayMs) }, "Slack Socket Mode could not reconnect");
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
      await withTimeout(
        socket.client
          .disconnect()
          .catch((err: unknown) => this.log.warn({ err }, "Socket Mode disconnect failed")),
        STOP_WAIT_MS,
      );
    }
    if (http) {
      await http.stop().catch((err: unknown) => this.log.debug({ err }, "HTTP receiver was not running"));
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
    const route = routeEvent(event, bot, this.policy, this.knownThread(event));
    if (route.kind === "ignore") {
      this.log.debug({ channel: event.channel, ts: event.ts, why: route.why }, "Slack message not taken");
      return;
    }
    this.seen.set(key, true);
    this.inOrder(event.channel, () => this.take(event, bot, route.kind === "checkThread"));
  }

  private knownThread(event: SlackMessageEvent): boolean | undefined {
    return event.thread_ts ? this.threads.get(`${event.channel}:${event.thread_ts}`) : undefined;
  }

  private async take(event: SlackMessageEvent, bot: BotIdentity, checkThread: boolean): Promise<void> {
    if (checkThread && !(await this.botInThread(event.channel, event.thread_ts ?? event.ts, bot))) {
      this.log.debug({ channel: event.channel, ts: event.ts }, "thread reply in a thread without the bot");
      return;
    }
    // The name first (a read, nothing the sender sees): allowFrom may name people by username.
    const senderName = event.user ? await this.userName(event.user) : undefined;
    const named = senderName ? { senderName } : {};
    const files = event.files ?? [];
    // Access before any side effect: a refused sender's files are not fetched, its message
    // gets no reaction and is not journaled. The manager still tells them how to get in
    // (at most once an hour), so the bare message is handed on with a note per file.
    const probe = toInbound(event, bot, this.policy, {
      media: [],
      notes: files.map(() => "[file]"),
      ...named,
    });
    if (probe && !isAllowed(probe, this.config.allowFrom)) {
      this.sink?.publishInbound(probe);
      return;
    }
    // Slack has the event acked already: journal a message with files before the slow downloads.
    const draft = files.length
      ? toInbound(event, bot, this.policy, { media: [], notes: [], ...named })
      : null;
    const reservation = draft ? this.sink?.reserve?.(reservedForm(draft)) : undefined;
    const { media, notes } = await this.fetchFiles(files);
    const msg = toInbound(event, bot, this.policy, { media, notes, ...named });
    if (!msg) {
      reservation?.cancel();
      return;
    }
    const threadTs = replyThreadOf(event, this.policy);
    if (threadTs && !isDirect(event)) {
      this.threads.set(`${event.channel}:${threadTs}`, true);
      if (event.user) this.recentThreads.set(`${event.channel}:${event.user}`, threadTs);
    }
    if (reservation) reservation.publish(msg);
    else this.sink?.publishInbound(msg);
    this.react(event.channel, event.ts);
  }

  private onCommand(raw: unknown): void {
    const parsed = SlackCommandSchema.safeParse(raw);
    if (!parsed.success) {
      this.log.warn({ issues: parsed.error.issues }, "unexpected Slack slash command payload");
      return;
    }
    const cmd = parsed.data;
    const recent = this.recentThreads.get(`${cmd.channel_id}:${cmd.user_id}`);
    this.inOrder(cmd.channel_id, async () => {
      // The payload's user_name is not trusted as an alias: it is looked up like any sender's.
      const senderName = await this.userName(cmd.user_id);
      this.sink?.publishInbound(slashCommandToInbound(cmd, recent, senderName));
    });
  }

  private inOrder(channel: string, work: () => Promise<void>): void {
    const previous = this.chains.get(channel) ?? Promise.resolve();
    const next = previous.then(work).catch((err: unknown) => {
      this.log.error({ err, channel }, "handling a Slack message failed");
    });
    this.chains.set(channel, next);
    this.track(next);
    void next.finally(() => {
      if (this.chains.get(channel) === next) this.chains.delete(channel);
    });
  }

  private track(task: Promise<unknown>): void {
    this.tasks.add(task);
    void task.finally(() => this.tasks.delete(task));
  }

  /** Whether the bot wrote in, or was mentioned in, this thread (conversations.replies, first page). */
  private async botInThread(channel: string, threadTs: string, bot: BotIdentity): Promise<boolean> {
    const key = `${channel}:${threadTs}`;
    let involved = false;
    try {
      const res = await this.web.conversations.replies({ channel, ts: threadTs, limit: 200 });
      involved = (res.messages ?? []).some(
        (m) =>
          m.user === bot.userId ||
          (bot.botId !== undefined && m.bot_id === bot.botId) ||
          mentions(m.text ?? "", bot.userId),
      );
    } catch (err) {
      this.log.warn(
        { err, channel },
        "could not read the thread (conversations.replies); not answering in it",
      );
    }
    this.threads.set(key, involved);
    return involved;
  }

  /** The sender's username, for allowFrom by name; looked up once an hour at most, never required. */
  private async userName(user: string): Promise<string | undefined> {
    const cached = this.userNames.get(user);
    if (cached !== undefined) return cached ?? undefined;
    if (!this.userLookup) return undefined;
    try {
      const res = await this.web.users.info({ user });
      // Only members of the bot's own workspace: a Slack Connect guest may share a username with someone allowed here.
      const member = res.user && !res.user.deleted && res.user.team_id === this.bot?.teamId;
      const name = (member ? res.user?.name : undefined) ?? null;
      this.userNames.set(user, name);
      return name ?? undefined;
    } catch (err) {
      if (platformError(err) === "missing_scope") {
        this.userLookup = false;
        this.log.info("no users:read scope: Slack senders are known by id only");
      } else {
        this.log.debug({ err, user }, "users.info failed");
      }
      this.userNames.set(user, null);
      return undefined;
    }
  }

  private async fetchFiles(files: SlackFile[]): Promise<{ media: string[]; notes: string[] }> {
    const media: string[] = [];
    const notes: string[] = [];
    for (const file of files.slice(0, MAX_FILES)) {
      const name = fileNameOf(file);
      const url = file.url_private_download ?? file.url_private;
      if (!url || file.mode === "tombstone" || file.mode === "hidden_by_limit") {
        notes.push(`[The file ${name} is not available to the bot.]`);
        continue;
      }
      if (!isSlackFileUrl(url, this.apiUrl)) {
        this.log.warn({ url }, "file URL is not on a Slack host; not sending the bot token there");
        notes.push(`[The file ${name} could not be downloaded.]`);
        continue;
      }
      const dest = mediaPath(this.opts.workspace, CHANNEL_NAME, name);
      try {
        await downloadFile({
          url,
          dest,
          maxBytes: this.opts.maxMediaBytes,
          headers: { Authorization: `Bearer ${this.config.botToken}` },
          signal: this.lifetime.signal,
          timeoutMs: this.opts.downloadTimeoutMs ?? 60_000,
          ...(typeof file.size === "number" ? { expectedBytes: file.size } : {}),
        });
        if (await isLoginPage(dest, file.mimetype)) {
          await rm(dest, { force: true });
          this.log.warn(
            { file: name },
            "Slack sent a sign-in page instead of the file: add the files:read scope",
          );
          notes.push(`[The file ${name} could not be downloaded: the bot lacks the files:read scope.]`);
          continue;
        }
        media.push(dest);
      } catch (err) {
        if (err instanceof MediaTooLargeError) {
          notes.push(`[The file ${name} was not downloaded: ${err.message}.]`);
        } else {
          this.log.warn({ err, file: name }, "Slack file download failed");
          notes.push(`[The file ${name} could not be downloaded.]`);
        }
      }
    }
    if (files.length > MAX_FILES) notes.push(`[${files.length - MAX_FILES} more files were not downloaded.]`);
    return { media, notes };
  }

  // ---------------------------------------------------------------------------
  // Reactions and uploads

  private react(channel: string, ts: string): void {
    const emoji = this.config.reactEmoji;
    if (!emoji) return;
    const added = this.web.reactions
      .add({ channel, timestamp: ts, name: emoji })
      .then(() => true)
      .catch((err: unknown) => {
        this.log.debug({ err, channel }, "could not add the receipt reaction");
        return false;
      });
    this.pendingReactions.set(`${channel}:${ts}`, added);
    this.track(added);
  }

  /** The reply is out: the receipt reaction becomes doneEmoji (once per message). */
  private async markDone(channel: string, messageId: unknown): Promise<void> {
    if (typeof messageId !== "string") return;
    const key = `${channel}:${messageId}`;
    const added = this.pendingReactions.get(key);
    if (!added) return;
    this.pendingReactions.delete(key);
    if (!(await added)) return;
    try {
      await this.web.reactions.remove({ channel, timestamp: messageId, name: this.config.reactEmoji });
      if (this.config.doneEmoji) {
        await this.web.reactions.add({ channel, timestamp: messageId, name: this.config.doneEmoji });
      }
    } catch (err) {
      this.log.debug({ err, channel }, "could not swap the reaction");
    }
  }

  private async upload(channel: string, threadTs: string | undefined, path: string): Promise<void> {
    const file = await readFile(path);
    const filename = basename(path);
    await this.call("files.uploadV2", () =>
      threadTs
        ? this.web.files.uploadV2({ channel_id: channel, thread_ts: threadTs, file, filename })
        : this.web.files.uploadV2({ channel_id: channel, file, filename }),
    );
  }

  /** A Web API call whose failure becomes a ChannelError naming the method and Slack's reason. */
  private async call<T>(method: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      const code = platformError(err);
      throw new ChannelError(
        code
          ? `Slack refused ${method}: ${code}${hint(code)}`
          : `Slack ${method} failed: ${errorMessage(err)}`,
        { cause: err },
      );
    }
  }
}

// ---------------------------------------------------------------------------

/** Settings that cannot work, in plain words (the registry reports them; retrying would not help). */
function checkConfig(config: SlackConfig): void {
  if (!config.botToken) {
    throw new ChannelError(
      "channels.slack.botToken is empty: paste the app's Bot User OAuth Token (xoxb-...)",
    );
  }
  if (config.mode === "socket") {
    if (!config.appToken) {
      throw new ChannelError(
        "channels.slack.appToken is empty: Socket Mode needs an app-level token (xapp-...) with connections:write",
      );
    }
    if (!config.appToken.startsWith("xapp-")) {
      throw new ChannelError(
        "channels.slack.appToken must be an app-level token (xapp-...), not a bot or user token",
      );
    }
  } else if (!config.signingSecret) {
    throw new ChannelError(
      'channels.slack.signingSecret is empty: mode "http" needs the Signing Secret from the app\'s Basic Information',
    );
  }
}

function normalizeApiUrl(url: string): string {
  const trimmed = url.trim();
  if (!trimmed) return "";
  return trimmed.endsWith("/") ? trimmed : `${trimmed}/`;
}

/** Slack's error code (`invalid_auth`, `not_in_channel` ...) of a Web API error, if it is one. */
function platformError(err: unknown): string | undefined {
  if (typeof err !== "object" || err === null) return undefined;
  const e = err as { code?: unknown; data?: { error?: unknown } };
  return e.code === webApi.ErrorCode.PlatformError && typeof e.data?.error === "string"
    ? e.data.error
    : undefined;
}

function hint(code: string): string {
  switch (code) {
    case "not_in_channel":
    case "channel_not_found":
      return " (invite the bot to the channel: /invite @palaver)";
    case "missing_scope":
      return " (add the scope to the app, see docs/slack.md, and reinstall it)";
    default:
      return "";
  }
}

/** Slack answers a file URL with its sign-in page when the token may not read files. */
async function isLoginPage(path: string, mimetype: string | null | undefined): Promise<boolean> {
  if (mimetype?.includes("html")) return false;
  const head = (await readFile(path)).subarray(0, 512).toString("utf8").trimStart().toLowerCase();
  return head.startsWith("<!doctype html") || head.startsWith("<html");
}

async function withTimeout(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([promise, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

/** `promise`, or a rejection after `ms` or when `signal` aborts. */
async function withDeadline<T>(
  promise: Promise<T>,
  ms: number,
  signal: AbortSignal,
  timeoutError: () => Error,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  // The loser of the race may still reject later; that must not be an unhandled rejection.
  promise.catch(() => undefined);
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(timeoutError()), ms);
    onAbort = () => reject(new ChannelError("stopped while connecting to Slack"));
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
    if (onAbort) signal.removeEventListener("abort", onAbort);
  }
}
