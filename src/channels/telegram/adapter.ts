/**
 * The Telegram channel: grammy wiring only. What a message means lives in
 * mapping.ts, how a reply looks in format.ts.
 *
 * Connection: long polling (grammy's bot.start under a supervisor that
 * restarts it after failures and when a watchdog sees it stalled), or a
 * webhook served by a small node:http server. API calls are retried by
 * @grammyjs/auto-retry (429 retry_after, 5xx) plus a bounded retry of
 * network errors here. Inbound messages are processed in the background, in
 * order per chat, so a slow download never holds up polling or other chats.
 */
import { randomBytes, timingSafeEqual } from "node:crypto";
import { reservedForm } from "../inbound.js";
import { chmod, copyFile, stat } from "node:fs/promises";
import { mkdirPrivate, PRIVATE_FILE_MODE } from "../../util/private-fs.js";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { extname, basename, isAbsolute, dirname } from "node:path";
import { autoRetry } from "@grammyjs/auto-retry";
import { Bot, GrammyError, HttpError, InputFile, type Transformer } from "grammy";
import type { Message } from "grammy/types";
import { z } from "zod";
import { COMMANDS, parseCommand } from "../../bus/commands.js";
import type { InboundMessage, OutboundMessage } from "../../bus/types.js";
import { backoffDelay, sleep } from "../../util/backoff.js";
import { logger, type Logger } from "../../log.js";
import { ChannelError, ConfigError, errorMessage } from "../../util/errors.js";
import { isAllowed } from "../access.js";
import { downloadFile, formatBytes, mediaPath, MediaTooLargeError } from "../media.js";
import type { ChannelFactoryContext } from "../registry.js";
import type { Channel, InboundReservation, InboundSink } from "../types.js";
import type { TelegramConfig } from "./config.js";
import { formatForTelegram, splitPlain, TELEGRAM_MAX_CAPTION, type TelegramChunk } from "./format.js";
import {
  CHANNEL,
  conversationKey,
  mapMessage,
  mergeAlbum,
  replyTarget,
  type Attachment,
  type BotIdentity,
  type MappedMessage,
  type ReplyTarget,
} from "./mapping.js";
import { proxyAgent } from "./proxy.js";
import { createTranscriber, type Transcriber } from "../transcription.js";
import { TypingIndicator } from "./typing.js";

/** Timings; the defaults suit Telegram, tests shorten them. */
export interface TelegramTuning {
  typingIntervalMs: number;
  typingMaxMs: number;
  /** How long to wait for the rest of an album after its last part. */
  albumDelayMs: number;
  /** Polling is restarted when no getUpdates call has finished for this long (default 3 × (pollTimeout + 15 s)). */
  watchdogMs: number | undefined;
  /** Extra time a long poll gets beyond its own timeout before it is given up as dead. */
  pollGraceMs: number;
  /** start() gives up (and rejects) when Telegram has not answered within this. */
  startTimeoutMs: number;
  stopTimeoutMs: number;
  /** Any single Bot API call (uploads included). */
  requestTimeoutSeconds: number;
  /** Backoff after polling failed while running (409, 401, …) and between network retries. */
  retryBaseMs: number;
  retryMaxMs: number;
  networkRetries: number;
}

export const DEFAULT_TUNING: TelegramTuning = {
  typingIntervalMs: 4000,
  typingMaxMs: 5 * 60_000,
  albumDelayMs: 600,
  watchdogMs: undefined,
  pollGraceMs: 15_000,
  startTimeoutMs: 30_000,
  stopTimeoutMs: 5000,
  requestTimeoutSeconds: 300,
  retryBaseMs: 2000,
  retryMaxMs: 5 * 60_000,
  networkRetries: 3,
};

export interface TelegramChannelOptions {
  config: TelegramConfig;
  workspace: string;
  /** channels.maxMediaBytes */
  maxMediaBytes: number;
  transcriber?: Transcriber | null;
  log?: Logger;
  tuning?: Partial<TelegramTuning>;
}

/** What the registry calls: validates the section, sets up transcription, builds the channel. */
export function createTelegramChannel(ctx: ChannelFactoryContext): Promise<TelegramChannel> {
  // Inside then(): a bad section (no token …) becomes a rejection, as the registry expects.
  return Promise.resolve().then(() => {
    let transcriber: Transcriber | null = null;
    try {
      transcriber = createTranscriber(ctx.config);
    } catch (err) {
      ctx.log.warn({ err }, `voice messages will not be transcribed: ${errorMessage(err)}`);
    }
    return new TelegramChannel({
      config: ctx.config.channels.telegram,
      workspace: ctx.workspace,
      maxMediaBytes: ctx.config.channels.maxMediaBytes,
      transcriber,
      log: ctx.log.child({ channel: CHANNEL }),
    });
  });
}

const COMMAND_MENU = (["new", "stop", "help", "status"] as const).map((name) => ({
  command: name,
  description: COMMANDS[name].slice(0, 256),
}));
const ALLOWED_UPDATES = ["message"] as const;
const MAX_WEBHOOK_BODY = 1024 * 1024;
const WEBHOOK_BODY_TIMEOUT_MS = 10_000;
const SEEN_UPDATES = 1000;
const ALBUM_MAX_PARTS = 10;
/** The cloud Bot API refuses getFile over this (a self-hosted server does not). */
const CLOUD_DOWNLOAD_LIMIT = 20 * 1024 * 1024;

/** The part of an update the webhook checks before handing it to grammy. */
const UpdateEnvelope = z.looseObject({ update_id: z.number().int().nonnegative() });

/** A Telegram error in plain words: what happened and what to do. */
export function describeTelegramError(err: unknown, apiRoot: string): string {
  if (err instanceof GrammyError) {
    if (err.error_code === 401) return "the Telegram bot token was rejected (check channels.telegram.token)";
    if (err.error_code === 409) {
      return /webhook/i.test(err.description)
        ? "a webhook is set for this bot token, so polling is refused (palaver removes it at start; is another program setting it?)"
        : "another instance is polling with this token (stop the other palaver/nanobot, or use webhook mode)";
    }
    if (err.error_code === 404 && err.method === "getMe") {
      return `the Bot API at ${apiRoot} does not know this token (check channels.telegram.token and channels.telegram.apiRoot)`;
    }
    return `Telegram refused ${err.method}: ${err.description}`;
  }
  if (err instanceof HttpError) {
    return `cannot reach the Telegram Bot API at ${apiRoot} (${errorMessage(err.error)}); check the network and channels.telegram.proxy`;
  }
  return errorMessage(err);
}

function isParseError(err: unknown): boolean {
  return (
    err instanceof GrammyError &&
    err.error_code === 400 &&
    /parse entities|can't find end|unsupported start tag|unexpected end tag/i.test(err.description)
  );
}

function isThreadGone(err: unknown): boolean {
  return (
    err instanceof GrammyError &&
    err.error_code === 400 &&
    /thread not found|TOPIC_DELETED|TOPIC_CLOSED/i.test(err.description)
  );
}

function seconds(ms: number): string {
  return ms % 1000 === 0 ? String(ms / 1000) : (ms / 1000).toFixed(1);
}

function chatIdParam(chatId: string): number | string {
  return /^-?\d+$/.test(chatId) ? Number(chatId) : chatId;
}

interface Deferred<T> {
  promise: Promise<T>;
  resolve: (v: T) => void;
  reject: (e: unknown) => void;
}

function deferred<T = void>(): Deferred<T> {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Resolves with the task's result, or after ms with undefined (the task keeps running; its rejection is swallowed). */
async function bounded<T>(task: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  task.catch(() => undefined);
  try {
    return await Promise.race([
      task,
      new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

interface Album {
  parts: { mapped: MappedMessage; accepted: boolean }[];
  timer: NodeJS.Timeout | undefined;
  complete: Deferred<void>;
}

type MediaMethod = "sendPhoto" | "sendVoice" | "sendAudio" | "sendVideo" | "sendAnimation" | "sendDocument";

const MEDIA_BY_EXT: Record<string, MediaMethod> = {
  ".jpg": "sendPhoto",
  ".jpeg": "sendPhoto",
  ".png": "sendPhoto",
  ".webp": "sendPhoto",
  ".ogg": "sendVoice",
  ".oga": "sendVoice",
  ".opus": "sendVoice",
  ".mp3": "sendAudio",
  ".m4a": "sendAudio",
  ".wav": "sendAudio",
  ".flac": "sendAudio",
  ".aac": "sendAudio",
  ".mp4": "sendVideo",
  ".mov": "sendVideo",
  ".gif": "sendAnimation",
};

const MEDIA_FIELD: Record<MediaMethod, string> = {
  sendPhoto: "photo",
  sendVoice: "voice",
  sendAudio: "audio",
  sendVideo: "video",
  sendAnimation: "animation",
  sendDocument: "document",
};

const ATTACHMENT_LABEL: Record<Attachment["kind"], string> = {
  photo: "photo",
  document: "file",
  voice: "voice message",
  audio: "audio file",
  video: "video",
  video_note: "video message",
  animation: "animation",
};

export class TelegramChannel implements Channel {
  readonly name = CHANNEL;
  readonly bot: Bot;
  private readonly cfg: TelegramConfig;
  private readonly apiRoot: string;
  private readonly tuning: TelegramTuning;
  private readonly log: Logger;
  private readonly typing: TypingIndicator;
  private me: BotIdentity | null = null;
  private sink: InboundSink | null = null;
  private lifetime = new AbortController();
  private running = false;
  /** Per conversation, the tail of its processing chain (keeps each chat in order). */
  private readonly chains = new Map<string, Promise<void>>();
  private readonly tasks = new Set<Promise<unknown>>();
  private readonly albums = new Map<string, Album>();
  private readonly seenUpdates = new Set<number>();
  // Polling
  private supervisor: Promise<void> | null = null;
  private watchdog: NodeJS.Timeout | undefined;
  private lastPollActivity = 0;
  private restarting: Promise<void> | null = null;
  // Webhook
  private server: Server | null = null;

  constructor(private readonly opts: TelegramChannelOptions) {
    this.cfg = opts.config;
    if (!this.cfg.token.trim()) {
      throw new ConfigError(
        "channels.telegram.token is empty: create a bot with @BotFather and set PALAVER_CHANNELS__TELEGRAM__TOKEN " +
          "in .env (or channels.telegram.token in the config)",
        ["channels.telegram.token: required"],
      );
    }
    if (this.cfg.mode === "webhook" && !this.cfg.webhook.url.trim()) {
      throw new ConfigError(
        'channels.telegram.mode is "webhook" but channels.telegram.webhook.url is empty: set the public HTTPS URL ' +
          'Telegram should post to, or use mode "polling"',
        ["channels.telegram.webhook.url: required in webhook mode"],
      );
    }
    this.apiRoot = this.cfg.apiRoot.replace(/\/+$/, "");
    this.tuning = { ...DEFAULT_TUNING, ...opts.tuning };
    this.log = opts.log ?? logger(CHANNEL);
    this.bot = new Bot(this.cfg.token.trim(), {
      client: {
        apiRoot: this.apiRoot,
        timeoutSeconds: this.tuning.requestTimeoutSeconds,
        ...(this.cfg.proxy
          ? { baseFetchConfig: { agent: proxyAgent(this.cfg.proxy, this.apiRoot), compress: true } }
          : {}),
      },
    });
    this.bot.api.config.use(
      autoRetry({ maxRetryAttempts: 3, maxDelaySeconds: 300, rethrowHttpErrors: true }),
    );
    this.bot.api.config.use(this.guard());
    this.bot.catch((err) => this.log.error({ err: err.error }, "handling a Telegram update failed"));
    this.bot.use(async (ctx, next) => {
      // Telegram may deliver an update twice (a webhook retry, polling restarted before confirming).
      if (this.seen(ctx.update.update_id)) return;
      await next();
    });
    this.bot.on("message", (ctx) => this.onMessage(ctx.message));
    this.typing = new TypingIndicator({
      send: async (chatId, threadId) => {
        await this.bot.api.sendChatAction(
          chatIdParam(chatId),
          "typing",
          threadId !== undefined ? { message_thread_id: threadId } : {},
          gs(this.lifetime.signal),
        );
      },
      intervalMs: this.tuning.typingIntervalMs,
      maxMs: this.tuning.typingMaxMs,
      log: this.log,
    });
  }

  /** The bot's own identity, once started. */
  get identity(): BotIdentity | null {
    return this.me;
  }

  /** Where the webhook server listens (tests use port 0). */
  get webhookAddress(): AddressInfo | null {
    const address = this.server?.address();
    return address && typeof address === "object" ? address : null;
  }

  async start(sink: InboundSink, signal: AbortSignal): Promise<void> {
    await this.shutdown();
    this.sink = sink;
    const lifetime = new AbortController();
    this.lifetime = lifetime;
    const onAbort = () => lifetime.abort();
    signal.addEventListener("abort", onAbort, { once: true });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(
          new ChannelError(
            `no answer from the Telegram Bot API at ${this.apiRoot} within ${seconds(this.tuning.startTimeoutMs)} s; ` +
              "check the network and channels.telegram.proxy",
          ),
        );
        lifetime.abort();
      }, this.tuning.startTimeoutMs);
    });
    const connecting = this.connect(lifetime.signal);
    connecting.catch(() => undefined);
    try {
      await Promise.race([connecting, timeout]);
      this.running = true;
    } catch (err) {
      await this.shutdown();
      if (err instanceof ChannelError) throw err;
      throw new ChannelError(describeTelegramError(err, this.apiRoot), { cause: err });
    } finally {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
    }
  }

  async stop(): Promise<void> {
    await this.shutdown();
  }

  async send(msg: OutboundMessage): Promise<void> {
    const target = replyTarget(msg, this.cfg.replyToMessage);
    const key = conversationKey(target.chatId, target.threadId);
    const kind = msg.kind ?? "final";
    if (kind !== "final") {
      // Progress and tool hints: small, plain, silent, unquoted; the turn is still going, so typing goes on.
      const { replyTo: _noQuote, ...where } = target;
      for (const text of splitPlain(msg.content)) {
        await this.sendText(where, { html: text, plain: text }, { plainOnly: true, silent: true });
      }
      this.typing.poke(key);
      return;
    }
    await this.typing.replied(key);
    const chunks = formatForTelegram(msg.content);
    const { replyTo: firstQuote, ...where } = target;
    let quote = firstQuote;
    // Only the first message of a reply quotes the user's message.
    const nextTarget = (): ReplyTarget => {
      const t = quote !== undefined ? { ...where, replyTo: quote } : where;
      quote = undefined;
      return t;
    };
    const { found: media, missing } = await existingFiles(msg.media ?? []);
    // A short reply with files rides along as the first file's caption.
    const captioned =
      media.length > 0 && chunks.length === 1 && chunks[0]!.html.length <= TELEGRAM_MAX_CAPTION;
    if (!captioned) for (const chunk of chunks) await this.sendText(nextTarget(), chunk);
    for (const [i, path] of media.entries()) {
      await this.sendFile(nextTarget(), path, captioned && i === 0 ? chunks[0] : undefined);
    }
    for (const path of missing) {
      this.log.warn({ path }, "cannot send a file that does not exist");
      const note = `(I couldn't send ${basename(path)}: the file is missing.)`;
      await this.sendText(nextTarget(), { html: note, plain: note }, { plainOnly: true });
    }
  }

  // ── connection ────────────────────────────────────────────────────────

  private async connect(signal: AbortSignal): Promise<void> {
    await this.bot.init(gs(signal));
    const info = this.bot.botInfo;
    this.me = { id: info.id, username: info.username };
    try {
      await this.bot.api.setMyCommands(COMMAND_MENU, {}, gs(signal));
    } catch (err) {
      if (signal.aborted) throw err;
      this.log.warn({ err }, "could not register the command menu (setMyCommands); commands still work");
    }
    if (this.cfg.mode === "webhook") await this.startWebhook(signal);
    else await this.startPolling(signal);
    this.log.info({ bot: `@${info.username}`, mode: this.cfg.mode }, "connected to Telegram");
  }

  /** Resolves once polling runs; afterwards the supervisor keeps it running until stop(). */
  private startPolling(signal: AbortSignal): Promise<void> {
    const first = deferred();
    this.lastPollActivity = Date.now();
    this.supervisor = this.supervise(signal, first);
    this.supervisor.catch(() => undefined);
    const watchdogMs = this.tuning.watchdogMs ?? 3 * (this.cfg.pollTimeout * 1000 + this.tuning.pollGraceMs);
    this.watchdog = setInterval(
      () => this.checkPolling(watchdogMs),
      Math.max(50, Math.min(watchdogMs / 4, 10_000)),
    );
    this.watchdog.unref();
    return first.promise;
  }

  private async supervise(signal: AbortSignal, first: Deferred<void>): Promise<void> {
    let started = false;
    let failures = 0;
    // Bounded by the signal: each round either runs until stopped or sleeps a growing backoff.
    while (!signal.aborted) {
      try {
        await this.bot.start({
          timeout: this.cfg.pollTimeout,
          allowed_updates: [...ALLOWED_UPDATES],
          drop_pending_updates: !started && this.cfg.dropPendingUpdates,
          onStart: async () => {
            // A quick getUpdates (no offset: confirms nothing) surfaces a 409 now rather than mid-run.
            await this.bot.api.getUpdates({ limit: 1, timeout: 0 }, gs(signal));
            this.lastPollActivity = Date.now();
            if (!started) first.resolve();
            else this.log.info("Telegram polling is running again");
            started = true;
            failures = 0;
          },
        });
        // bot.start resolves when polling was stopped: by stop(), or by the watchdog to restart it.
        if (this.restarting) await bounded(this.restarting, this.tuning.stopTimeoutMs);
        this.restarting = null;
      } catch (err) {
        if (!started) {
          first.reject(err);
          return;
        }
        if (signal.aborted) return;
        const waitMs = backoffDelay(failures++, this.tuning.retryBaseMs, this.tuning.retryMaxMs);
        this.log.error(
          { err, retryInMs: waitMs },
          `Telegram polling stopped: ${describeTelegramError(err, this.apiRoot)}; retrying`,
        );
        try {
          await sleep(waitMs, signal);
        } catch {
          return;
        }
      }
    }
  }

  private checkPolling(watchdogMs: number): void {
    if (!this.running || this.restarting || !this.bot.isRunning()) return;
    const silentMs = Date.now() - this.lastPollActivity;
    if (silentMs < watchdogMs) return;
    this.log.warn({ silentMs }, "Telegram polling has gone silent; restarting it");
    this.lastPollActivity = Date.now();
    // Aborts the stuck getUpdates; the supervisor starts polling again once this has settled.
    this.restarting = this.bot
      .stop()
      .catch((err: unknown) => this.log.debug({ err }, "stopping stalled polling"));
  }

  private async startWebhook(signal: AbortSignal): Promise<void> {
    const { webhook } = this.cfg;
    // Telegram sends the secret back on every request; without one configured, a fresh one per start.
    const secret = webhook.secretToken || randomBytes(24).toString("hex");
    const server = createServer((req, res) => void this.onWebhookRequest(req, res, secret));
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once("error", (err) =>
        reject(
          new ChannelError(
            `cannot listen on ${webhook.host}:${webhook.port} for the Telegram webhook: ${errorMessage(err)}`,
            { cause: err },
          ),
        ),
      );
      server.listen(webhook.port, webhook.host, () => resolve());
    });
    server.on("error", (err) => this.log.error({ err }, "Telegram webhook server error"));
    await this.bot.api.setWebhook(
      webhook.url,
      {
        secret_token: secret,
        drop_pending_updates: this.cfg.dropPendingUpdates,
        allowed_updates: [...ALLOWED_UPDATES],
      },
      gs(signal),
    );
  }

  private async onWebhookRequest(req: IncomingMessage, res: ServerResponse, secret: string): Promise<void> {
    const reply = (status: number, body = "") => {
      if (!res.headersSent) res.writeHead(status, { "content-type": "text/plain" }).end(body);
    };
    try {
      const path = new URL(req.url ?? "/", "http://localhost").pathname;
      if (path !== this.cfg.webhook.path) return reply(404, "not found");
      if (req.method !== "POST") return reply(405, "method not allowed");
      const given = req.headers["x-telegram-bot-api-secret-token"];
      if (typeof given !== "string" || !sameSecret(given, secret)) {
        this.log.warn(
          { remote: req.socket.remoteAddress },
          "webhook request with a wrong secret token refused",
        );
        return reply(401, "unauthorized");
      }
      const body = await readBody(req, MAX_WEBHOOK_BODY, WEBHOOK_BODY_TIMEOUT_MS);
      if (body === null) return reply(413, "too large");
      let parsed: unknown;
      try {
        parsed = JSON.parse(body.toString("utf8"));
      } catch {
        return reply(400, "not JSON");
      }
      const update = UpdateEnvelope.safeParse(parsed);
      if (!update.success) return reply(400, "not a Telegram update");
      // Our handler only queues work, so this is quick.
      try {
        await this.bot.handleUpdate(update.data);
      } catch (err) {
        this.log.error({ err }, "handling a Telegram webhook update failed");
      }
      reply(200, "ok"); // always: a non-200 makes Telegram resend the same update again and again
    } catch (err) {
      this.log.warn({ err }, "webhook request failed");
      reply(400, "bad request");
    }
  }

  /** Everything start() set up, undone; safe to call at any time. */
  private async shutdown(): Promise<void> {
    this.running = false;
    this.lifetime.abort();
    clearInterval(this.watchdog);
    this.watchdog = undefined;
    this.typing.endAll();
    for (const album of this.albums.values()) {
      clearTimeout(album.timer);
      album.complete.resolve();
    }
    this.albums.clear();
    const { stopTimeoutMs } = this.tuning;
    if (this.bot.isRunning()) await bounded(this.bot.stop(), stopTimeoutMs); // confirms the updates handled so far
    if (this.supervisor) await bounded(this.supervisor, stopTimeoutMs);
    this.supervisor = null;
    this.restarting = null;
    if (this.server) {
      const server = this.server;
      this.server = null;
      await bounded(new Promise<void>((resolve) => server.close(() => resolve())), stopTimeoutMs);
      server.closeAllConnections();
    }
    await bounded(Promise.allSettled([...this.tasks]), stopTimeoutMs);
    this.sink = null;
  }

  /**
   * Our transformer around every API call: long polls get a deadline of
   * their own (a dead connection must not hang polling) and mark the
   * watchdog; other calls are retried a few times on network errors.
   */
  private guard(): Transformer {
    return async (prev, method, payload, signal) => {
      if (method === "getUpdates") {
        const pollSeconds = (payload as { timeout?: number }).timeout ?? 0;
        const deadline = withDeadline(signal, pollSeconds * 1000 + this.tuning.pollGraceMs);
        try {
          return await prev(method, payload, gs(deadline.signal));
        } finally {
          deadline.dispose();
          this.lastPollActivity = Date.now();
        }
      }
      for (let attempt = 0; ; attempt++) {
        try {
          return await prev(method, payload, signal);
        } catch (err) {
          if (!(err instanceof HttpError) || signal?.aborted || attempt >= this.tuning.networkRetries)
            throw err;
          const waitMs = backoffDelay(attempt, this.tuning.retryBaseMs / 2, 30_000);
          this.log.debug(
            { method, waitMs, err: errorMessage(err) },
            "Telegram call failed on the network; retrying",
          );
          await pause(waitMs, signal);
        }
      }
    };
  }

  private seen(updateId: number): boolean {
    if (this.seenUpdates.has(updateId)) return true;
    this.seenUpdates.add(updateId);
    if (this.seenUpdates.size > SEEN_UPDATES) {
      const oldest = this.seenUpdates.values().next().value;
      if (oldest !== undefined) this.seenUpdates.delete(oldest);
    }
    return false;
  }

  // ── inbound ───────────────────────────────────────────────────────────

  private onMessage(msg: Message): void {
    const me = this.me;
    if (!me || !this.sink) return;
    if (msg.media_group_id) {
      this.addToAlbum(msg, me);
      return;
    }
    const mapped = mapMessage(msg, me, this.cfg);
    if (!mapped) return;
    const { chatId, metadata } = mapped.inbound;
    if (parseCommand(mapped.inbound.content)?.name === "stop") {
      // Never queued behind a download in the same chat: the agent must hear it now.
      this.typing.endOnNextReply(conversationKey(chatId, metadata?.threadId as number | undefined));
      this.sink.publishInbound(mapped.inbound);
      return;
    }
    // grammy confirms the update once this handler returns, before the downloads below are done:
    // journal the message now so a crash in between cannot lose it.
    const reservation =
      mapped.attachments.length > 0 && !mapped.isStart
        ? this.sink.reserve?.(reservedForm(mapped.inbound))
        : undefined;
    this.enqueue(conversationKey(chatId, metadata?.threadId as number | undefined), () =>
      this.process(mapped, reservation),
    );
  }

  private addToAlbum(msg: Message, me: BotIdentity): void {
    // Only one part of an album carries the caption (and so the @mention): every part is kept
    // and the album goes through if any part passes the group policy.
    const mapped = mapMessage(msg, me, { groupPolicy: "open", groupAllowFrom: [] });
    if (!mapped) return;
    const accepted = mapMessage(msg, me, this.cfg) !== null;
    const key = `${mapped.inbound.chatId}:${msg.media_group_id}`;
    let album = this.albums.get(key);
    if (!album) {
      const created: Album = { parts: [], timer: undefined, complete: deferred() };
      album = created;
      this.albums.set(key, created);
      const conversation = conversationKey(
        mapped.inbound.chatId,
        mapped.inbound.metadata?.threadId as number | undefined,
      );
      // The update is confirmed before the album is gathered and downloaded: journal it now.
      const reservation = this.sink?.reserve?.(reservedForm(mapped.inbound));
      this.enqueue(conversation, async () => {
        await created.complete.promise;
        this.albums.delete(key);
        if (this.lifetime.signal.aborted) return; // left reserved: the next start answers it
        if (!created.parts.some((p) => p.accepted)) {
          reservation?.cancel();
          return;
        }
        await this.process(mergeAlbum(created.parts.map((p) => p.mapped)), reservation);
      });
    }
    album.parts.push({ mapped, accepted });
    clearTimeout(album.timer);
    const complete = album.complete;
    if (album.parts.length >= ALBUM_MAX_PARTS) complete.resolve();
    else album.timer = setTimeout(() => complete.resolve(), this.tuning.albumDelayMs);
  }

  private enqueue(key: string, task: () => Promise<void>): void {
    const previous = this.chains.get(key) ?? Promise.resolve();
    const next = previous
      .then(task)
      .catch((err: unknown) => this.log.error({ err }, "processing a Telegram message failed"));
    this.chains.set(key, next);
    this.tasks.add(next);
    void next.finally(() => {
      this.tasks.delete(next);
      if (this.chains.get(key) === next) this.chains.delete(key);
    });
  }

  private async process(mapped: MappedMessage, reservation?: InboundReservation): Promise<void> {
    const sink = this.sink;
    const signal = this.lifetime.signal;
    if (!sink || signal.aborted) return;
    const inbound = mapped.inbound;
    const threadId = inbound.metadata?.threadId as number | undefined;
    const key = conversationKey(inbound.chatId, threadId);
    const allowed = isAllowed(inbound, this.cfg.allowFrom);
    // A refused /start is handed on like any refused message: the manager answers it through
    // the one notice limiter (at most once an hour), so /start cannot be used to spam the notice.
    if (mapped.isStart && allowed) {
      await this.greet(inbound);
      return;
    }
    // From here on the message is accepted: show "typing…" while files download and the agent works.
    if (allowed) this.typing.begin(key, inbound.chatId, threadId);
    // Files from people who are not let in are not downloaded: the manager refuses the message anyway.
    const { media, notes } = allowed
      ? await this.fetchAttachments(mapped.attachments, inbound, signal)
      : { media: [], notes: mapped.attachments.map((a) => `[${ATTACHMENT_LABEL[a.kind]}]`) };
    if (signal.aborted) return;
    const content = [inbound.content, ...notes].filter((line) => line !== "").join("\n");
    const message = { ...inbound, content, ...(media.length ? { media } : {}) };
    if (reservation) reservation.publish(message);
    else sink.publishInbound(message);
  }

  private async greet(inbound: InboundMessage): Promise<void> {
    const name = this.me ? `@${this.me.username}` : "this bot";
    const text =
      `Hello! I'm ${name}, your palaver assistant. Send me a message and I'll answer. ` +
      `Commands: /new starts a new conversation, /stop cancels a reply, /status and /help tell you more. ` +
      `(Your Telegram user id is ${inbound.senderId}.)`;
    await this.sendText(replyTarget(inbound, false), { html: text, plain: text }, { plainOnly: true });
  }

  private async fetchAttachments(
    attachments: readonly Attachment[],
    inbound: InboundMessage,
    signal: AbortSignal,
  ): Promise<{ media: string[]; notes: string[] }> {
    const media: string[] = [];
    const notes: string[] = [];
    const tooLarge: string[] = [];
    const results = await Promise.all(
      attachments.map(async (att) => {
        try {
          return { att, path: await this.download(att, signal) };
        } catch (err) {
          return { att, err };
        }
      }),
    );
    for (const result of results) {
      const label = ATTACHMENT_LABEL[result.att.kind];
      if ("err" in result) {
        if (result.err instanceof MediaTooLargeError) {
          const size = result.err.sizeBytes !== undefined ? ` (${formatBytes(result.err.sizeBytes)})` : "";
          tooLarge.push(`${result.att.fileName}${size}`);
          notes.push(`[${label} "${result.att.fileName}" not downloaded: ${result.err.message}]`);
        } else {
          this.log.warn(
            { err: result.err, kind: result.att.kind },
            "downloading a Telegram attachment failed",
          );
          notes.push(`[${label} "${result.att.fileName}" could not be downloaded]`);
        }
        continue;
      }
      media.push(result.path);
      if ((result.att.kind === "voice" || result.att.kind === "audio") && this.opts.transcriber) {
        try {
          const text = await this.opts.transcriber.transcribe(result.path, signal);
          notes.push(text ? `[${label}, transcribed: ${text}]` : `[${label}: no speech recognised]`);
        } catch (err) {
          this.log.warn({ err }, "transcribing a voice message failed");
          notes.push(`[${label}: transcription failed; the audio file is attached]`);
        }
      } else if (inbound.content === "") {
        notes.push(`[${label}]`);
      }
    }
    if (tooLarge.length > 0) {
      const limit = formatBytes(this.opts.maxMediaBytes);
      await this.sendText(
        replyTarget(inbound, true),
        {
          html: "",
          plain: `Sorry, I can't take files over ${limit}, so I didn't look at: ${tooLarge.join(", ")}.`,
        },
        { plainOnly: true },
      ).catch((err: unknown) => this.log.warn({ err }, "could not tell the user a file was too large"));
    }
    return { media, notes };
  }

  private async download(att: Attachment, signal: AbortSignal): Promise<string> {
    const max = this.opts.maxMediaBytes;
    if (att.sizeBytes !== undefined && att.sizeBytes > max) throw new MediaTooLargeError(att.sizeBytes, max);
    let file;
    try {
      file = await this.bot.api.getFile(att.fileId, gs(signal));
    } catch (err) {
      if (err instanceof GrammyError && /too big/i.test(err.description)) {
        throw new MediaTooLargeError(att.sizeBytes, Math.min(max, CLOUD_DOWNLOAD_LIMIT));
      }
      throw err;
    }
    if (!file.file_path) throw new ChannelError("Telegram returned no file path for this file");
    const dest = mediaPath(this.opts.workspace, CHANNEL, att.fileName);
    if (isAbsolute(file.file_path)) {
      // A self-hosted Bot API server in --local mode hands out paths on its own disk.
      const size = (await stat(file.file_path)).size;
      if (size > max) throw new MediaTooLargeError(size, max);
      await mkdirPrivate(dirname(dest));
      await copyFile(file.file_path, dest);
      await chmod(dest, PRIVATE_FILE_MODE);
      return dest;
    }
    return downloadFile({
      url: `${this.apiRoot}/file/bot${this.cfg.token.trim()}/${file.file_path}`,
      dest,
      maxBytes: max,
      signal,
      ...(file.file_size !== undefined ? { expectedBytes: file.file_size } : {}),
    });
  }

  // ── outbound ──────────────────────────────────────────────────────────

  private replyOptions(target: ReplyTarget, silent = false) {
    return {
      ...(target.threadId !== undefined ? { message_thread_id: target.threadId } : {}),
      ...(target.replyTo !== undefined
        ? { reply_parameters: { message_id: target.replyTo, allow_sending_without_reply: true } }
        : {}),
      ...(silent ? { disable_notification: true } : {}),
    };
  }

  /** Sends one chunk as HTML, falling back to plain text when Telegram cannot parse it. */
  private async sendText(
    target: ReplyTarget,
    chunk: TelegramChunk,
    opts: { plainOnly?: boolean; silent?: boolean } = {},
  ): Promise<void> {
    if (!chunk.plain.trim()) return;
    await this.withTargetFallbacks(target, async (t) => {
      const base = this.replyOptions(t, opts.silent);
      if (opts.plainOnly) {
        await this.bot.api.sendMessage(chatIdParam(t.chatId), chunk.plain, base);
        return;
      }
      try {
        await this.bot.api.sendMessage(chatIdParam(t.chatId), chunk.html, { ...base, parse_mode: "HTML" });
      } catch (err) {
        if (!isParseError(err)) throw err;
        this.log.warn(
          { err: errorMessage(err) },
          "Telegram refused the formatted reply; sending it as plain text",
        );
        await this.bot.api.sendMessage(chatIdParam(t.chatId), chunk.plain, base);
      }
    });
  }

  private async sendFile(
    target: ReplyTarget,
    path: string,
    caption: TelegramChunk | undefined,
  ): Promise<void> {
    const method: MediaMethod = MEDIA_BY_EXT[extname(path).toLowerCase()] ?? "sendDocument";
    await this.withTargetFallbacks(target, async (t) => {
      const send = async (m: MediaMethod, withCaption: "html" | "plain" | "none") => {
        const payload: Record<string, unknown> = {
          chat_id: chatIdParam(t.chatId),
          [MEDIA_FIELD[m]]: new InputFile(path, basename(path)),
          ...this.replyOptions(t),
          ...(caption && withCaption === "html" ? { caption: caption.html, parse_mode: "HTML" } : {}),
          ...(caption && withCaption === "plain"
            ? { caption: caption.plain.slice(0, TELEGRAM_MAX_CAPTION) }
            : {}),
        };
        // The method is picked at run time; the raw API takes its payload as-is.
        await (this.bot.api.raw[m] as (p: Record<string, unknown>, s?: AbortSignal) => Promise<unknown>)(
          payload,
        );
      };
      try {
        await send(method, "html");
      } catch (err) {
        if (isParseError(err)) await send(method, "plain");
        // Photos have size and dimension limits documents do not.
        else if (method !== "sendDocument" && err instanceof GrammyError && err.error_code === 400)
          await send("sendDocument", "html");
        else throw err;
      }
    });
  }

  /** Retries a send in the General topic when the forum topic is gone, and in the new chat when a group was upgraded. */
  private async withTargetFallbacks(
    target: ReplyTarget,
    send: (t: ReplyTarget) => Promise<void>,
  ): Promise<void> {
    try {
      await send(target);
    } catch (err) {
      if (isThreadGone(err) && target.threadId !== undefined) {
        const { threadId: _gone, ...rest } = target;
        await send(rest);
        return;
      }
      const migrated = err instanceof GrammyError ? err.parameters.migrate_to_chat_id : undefined;
      if (migrated !== undefined) {
        this.log.warn({ from: target.chatId, to: migrated }, "the group became a supergroup; sending there");
        await send({ ...target, chatId: String(migrated) });
        return;
      }
      throw new ChannelError(
        `sending to Telegram chat ${target.chatId} failed: ${describeTelegramError(err, this.apiRoot)}`,
        {
          cause: err,
        },
      );
    }
  }
}

/**
 * grammy hands transformers the signal of its own AbortController polyfill,
 * which the native AbortSignal helpers (any, timers/promises) do not accept;
 * these two only use addEventListener.
 */
interface AnySignal {
  readonly aborted: boolean;
  addEventListener(type: "abort", listener: () => void): void;
  removeEventListener(type: "abort", listener: () => void): void;
}

/** grammy's methods are typed with the polyfill's AbortSignal; a native one works the same at run time. */
type GrammySignal = NonNullable<Parameters<Bot["api"]["getMe"]>[0]>;
function gs(signal: AbortSignal): GrammySignal {
  return signal as unknown as GrammySignal;
}

function withDeadline(
  signal: AnySignal | undefined,
  ms: number,
): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  const abort = () => controller.abort();
  const timer = setTimeout(abort, ms);
  if (signal?.aborted) abort();
  signal?.addEventListener("abort", abort);
  return {
    signal: controller.signal,
    dispose: () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", abort);
    },
  };
}

function pause(ms: number, signal: AnySignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(new ChannelError("aborted"));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    if (signal?.aborted) onAbort();
    else signal?.addEventListener("abort", onAbort);
  });
}

async function existingFiles(paths: readonly string[]): Promise<{ found: string[]; missing: string[] }> {
  const found: string[] = [];
  const missing: string[] = [];
  for (const path of paths) {
    const isFile = await stat(path).then(
      (st) => st.isFile(),
      () => false,
    );
    (isFile ? found : missing).push(path);
  }
  return { found, missing };
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The request body, or null when it is larger than maxBytes. */
function readBody(req: IncomingMessage, maxBytes: number, timeoutMs: number): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers["content-length"] ?? NaN);
    if (Number.isFinite(declared) && declared > maxBytes) {
      resolve(null);
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const timer = setTimeout(() => {
      req.destroy();
      reject(new ChannelError("webhook request body timed out"));
    }, timeoutMs);
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        clearTimeout(timer);
        req.removeAllListeners("data");
        resolve(null);
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks));
    });
    req.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}
