/**
 * The Telegram channel: its lifecycle and the wiring between grammy and the
 * shared channel core. What a message means lives in mapping.ts, its files in
 * attachments.ts, how a reply goes out in send.ts (the single send point) and
 * format.ts; the connection in polling.ts or webhook.ts, the API wrapper in
 * api.ts.
 *
 * Inbound messages go through the shared InboundPath (gate first, then
 * journal, download, transcribe, publish, in order per chat) so a slow
 * download never holds up polling or other chats. "typing…" is the shared
 * TypingIndicator, driven by turn events (onTurn), never by replies.
 *
 * Questions go out with an inline keyboard (send.ts, questions.ts); a press
 * arrives as a callback query, is handed to the sink's `choose` (which does
 * the access check) and always answered, with the sink's notice shown to the
 * presser alone.
 */
import { setMaxListeners } from "node:events";
import type { Agent as HttpAgent } from "node:http";
import { setImmediate as nextLoopTurn } from "node:timers/promises";
import type { Bot } from "grammy";
import type { CallbackQuery, ChatMemberUpdated, Message } from "grammy/types";
import { COMMANDS, parseCommand } from "../../bus/commands.js";
import type { InboundMessage, OutboundMessage, TurnEvent } from "../../bus/types.js";
import { logger, type Logger } from "../../log.js";
import { BoundedMap } from "../../util/bounded-map.js";
import { ChannelError, ConfigError } from "../../util/errors.js";
import { withTimeout, TimeoutError } from "../../util/timeout.js";
import { platformConnections } from "../../config/platforms/common.js";
import { InboundPath } from "../inbound.js";
import { INGRESS_LEASES, LeasedIngress, type IngressLease } from "../ingress-lease.js";
import type { ChannelFactoryContext } from "../platform.js";
import { transcriberFor, type Transcriber } from "../transcription.js";
import { TypingIndicator } from "../typing.js";
import type { Channel, InboundSink, PreviewSurface, PreviewTarget, SentMessage } from "../types.js";
import { chatIdParam, createBot, createPreviewApi, gs, telegramAgent } from "./api.js";
import { AlbumCollector, incomingFiles, type DownloadContext } from "./attachments.js";
import { telegramProblems, type TelegramConfig } from "../../config/platforms/telegram.js";
import { describeTelegramError } from "./errors.js";
import {
  CHANNEL,
  conversationKey,
  leftPrivateChat,
  mapMessage,
  replyTarget,
  type BotIdentity,
  type ReplyTarget,
} from "./mapping.js";
import { Polling } from "./polling.js";
import { DraftSupport, isPrivateChat, TelegramPreview } from "./preview.js";
import { callbackNotice, choiceClickOf } from "./questions.js";
import { TelegramSender } from "./send.js";
import { DEFAULT_TUNING, seconds, type TelegramTuning } from "./tuning.js";
import { WebhookServer } from "./webhook.js";

export { describeTelegramError } from "./errors.js";
export type { TelegramTuning } from "./tuning.js";

export interface TelegramChannelOptions {
  config: TelegramConfig;
  workspace: string;
  /** channels.maxMediaBytes */
  maxMediaBytes: number;
  transcriber?: Transcriber | null;
  log?: Logger;
  tuning?: Partial<TelegramTuning>;
  /** What the Bot API calls go through (telegramAgent: its pool bound, the proxy if one is set). */
  agent: HttpAgent;
  /**
   * Cluster mode, polling: long polling runs only while this lease is held (one instance polls;
   * every instance sends). Absent: polling always runs. Not used in webhook mode.
   */
  lease?: IngressLease;
}

/** What the registry calls: validates the section, sets up transcription, builds the channel. */
export function createTelegramChannel(
  ctx: ChannelFactoryContext,
  tuning?: Partial<TelegramTuning>,
): Promise<TelegramChannel> {
  // Inside then(): a bad section (no token …) becomes a rejection, as the registry expects.
  return Promise.resolve().then(async () => {
    const log = ctx.log.child({ channel: CHANNEL });
    const config = ctx.config.channels.telegram;
    const maxConnections = platformConnections(ctx.config.agents.defaults);
    // Webhook mode runs on every instance: Telegram posts each update to one of them.
    const lease = config.mode === "polling" ? ctx.gateway?.lease?.(INGRESS_LEASES.telegram) : undefined;
    return new TelegramChannel({
      config,
      workspace: ctx.workspace,
      maxMediaBytes: ctx.config.channels.maxMediaBytes,
      transcriber: transcriberFor(ctx.config, log),
      log,
      agent: await telegramAgent(config, config.apiRoot, maxConnections),
      ...(tuning ? { tuning } : {}),
      ...(lease ? { lease } : {}),
    });
  });
}

const COMMAND_MENU = (["new", "stop", "help", "status"] as const).map((name) => ({
  command: name,
  description: COMMANDS[name].slice(0, 256),
}));
/** Update ids remembered to drop a redelivered update (a webhook retry, polling restarted before confirming). */
const SEEN_UPDATES = 1000;
/** Question messages remembered for edits that name only the question (after a restart the desk gives the ref). */
const QUESTION_REFS = 500;
const NOT_HERE = "This can't be answered here.";

export class TelegramChannel implements Channel {
  readonly name = CHANNEL;
  readonly bot: Bot;
  private readonly cfg: TelegramConfig;
  private readonly apiRoot: string;
  private readonly tuning: TelegramTuning;
  private readonly log: Logger;
  private readonly typing: TypingIndicator<ReplyTarget>;
  private readonly sender: TelegramSender;
  /** Sends previews: a 429 comes back to live-preview.ts, which coalesces instead of resending stale text. */
  private readonly previewSender: TelegramSender;
  private readonly drafts: DraftSupport;
  private readonly polling: Polling;
  /** Cluster mode: polling runs while this instance holds the lease. */
  private readonly leased: LeasedIngress | null;
  private readonly webhook: WebhookServer;
  private readonly albums: AlbumCollector;
  private readonly downloads: DownloadContext;
  private readonly seenUpdates = new BoundedMap<number, true>(SEEN_UPDATES);
  /** questionId → the message_id of the message carrying its buttons. */
  private readonly questionRefs = new BoundedMap<string, number>(QUESTION_REFS);
  private me: BotIdentity | null = null;
  private sink: InboundSink | null = null;
  private inbound: InboundPath | null = null;
  private lifetime = new AbortController();

  constructor(private readonly opts: TelegramChannelOptions) {
    this.cfg = opts.config;
    // The same problems config check and the gateway report (config/platforms/telegram.ts), in case the channel is built directly.
    const problems = telegramProblems(this.cfg);
    if (problems.length > 0) throw new ConfigError(problems.join("; "), problems);
    this.apiRoot = this.cfg.apiRoot.replace(/\/+$/, "");
    this.tuning = { ...DEFAULT_TUNING, ...opts.tuning };
    this.log = opts.log ?? logger(CHANNEL);
    const { tuning, log, apiRoot } = this;
    const { agent } = opts;
    this.bot = createBot({
      config: this.cfg,
      apiRoot,
      tuning,
      log,
      onPoll: () => this.polling.markActivity(),
      agent,
    });
    this.polling = new Polling({
      bot: this.bot,
      config: this.cfg,
      tuning,
      log,
      describe: (e) => this.describe(e),
    });
    this.leased =
      opts.lease && this.cfg.mode === "polling"
        ? new LeasedIngress({
            lease: opts.lease,
            what: "Telegram polling",
            begin: (signal) =>
              this.polling.start(AbortSignal.any([signal, this.lifetime.signal]), { keepPending: true }),
            // Confirms the updates taken in so far (bot.stop's last getUpdates), so the next holder
            // does not get them again.
            end: () => this.polling.stop(),
            log,
            retryBaseMs: tuning.retryBaseMs,
            retryMaxMs: Math.min(tuning.retryMaxMs, 30_000),
          })
        : null;
    if (this.leased && this.cfg.dropPendingUpdates) {
      log.warn(
        "channels.telegram.dropPendingUpdates is not applied in cluster mode: the instance taking polling over " +
          "must get the messages that came while it changed hands",
      );
    }
    this.webhook = new WebhookServer(this.bot, this.cfg, log);
    this.sender = new TelegramSender(this.bot.api, apiRoot, log);
    const previewApi = createPreviewApi({
      config: this.cfg,
      apiRoot,
      tuning,
      log,
      onPoll: () => undefined,
      agent,
    });
    this.previewSender = new TelegramSender(previewApi, apiRoot, log);
    this.drafts = new DraftSupport(log);
    this.downloads = {
      bot: this.bot,
      apiRoot,
      token: this.cfg.token.trim(),
      workspace: opts.workspace,
      maxMediaBytes: opts.maxMediaBytes,
    };
    this.albums = new AlbumCollector(tuning.albumDelayMs, (atts) => incomingFiles(atts, this.downloads));
    this.bot.catch((err) => log.error({ err: err.error }, "handling a Telegram update failed"));
    this.bot.use(async (ctx, next) => {
      // Telegram may deliver an update twice (a webhook retry, polling restarted before confirming).
      if (this.seenUpdates.has(ctx.update.update_id)) return;
      this.seenUpdates.set(ctx.update.update_id, true);
      await next();
      // Cluster mode: the next getUpdates confirms this update to Telegram, so it must be stored
      // where another instance finds it first.
      await this.sink?.stored?.();
      // grammy takes a getUpdates batch (up to 100) one update after another, all in promise
      // callbacks: what an update started (its turn's LLM request, the typing action) is written
      // to its socket only once nothing is left to run in them, i.e. after the whole batch. One
      // turn of the event loop per update lets each go out at once (bench/throughput.ts shows it).
      await nextLoopTurn();
    });
    this.bot.on("message", (ctx) => this.onMessage(ctx.message));
    this.bot.on("callback_query", (ctx) => this.onPress(ctx.callbackQuery));
    this.bot.on("my_chat_member", (ctx) => this.onMembership(ctx.myChatMember));
    this.typing = new TypingIndicator<ReplyTarget>({
      signal: async (target) => {
        const thread = target.threadId !== undefined ? { message_thread_id: target.threadId } : {};
        await this.bot.api.sendChatAction(
          chatIdParam(target.chatId),
          "typing",
          thread,
          gs(this.lifetime.signal),
        );
      },
      intervalMs: tuning.typingIntervalMs,
      maxMs: tuning.typingMaxMs,
      log,
    });
  }

  /** The bot's own identity, once started. */
  get identity(): BotIdentity | null {
    return this.me;
  }

  /** Where the webhook server listens (tests use port 0). */
  get webhookAddress() {
    return this.webhook.address;
  }

  /** Whether "typing…" is being shown in this chat (or forum topic) now. */
  isTyping(chatId: string, threadId?: number): boolean {
    return this.typing.isActive(conversationKey(chatId, threadId));
  }

  async start(sink: InboundSink, signal: AbortSignal): Promise<void> {
    await this.shutdown();
    const lifetime = new AbortController();
    // Every Bot API call in flight (typing and previews of many chats at once) listens to it until
    // it ends (api.ts takes the listener off): many at once is normal, not the leak Node warns of.
    setMaxListeners(0, lifetime.signal);
    this.lifetime = lifetime;
    this.sink = sink;
    this.inbound = new InboundPath({
      signal: lifetime.signal,
      maxMediaBytes: this.opts.maxMediaBytes,
      transcriber: this.opts.transcriber ?? null,
      notify: (msg, text) => this.sender.notice(replyTarget({ ...msg, replyTo: msg.messageId }, true), text),
      log: this.log,
    });
    const onAbort = () => lifetime.abort();
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      await withTimeout(this.connect(lifetime.signal), this.tuning.startTimeoutMs, "connecting to Telegram");
    } catch (err) {
      lifetime.abort();
      await this.shutdown();
      if (err instanceof TimeoutError) {
        throw new ChannelError(
          `no answer from the Telegram Bot API at ${this.apiRoot} within ${seconds(this.tuning.startTimeoutMs)} s; ` +
            "check the network and channels.telegram.proxy",
          { cause: err, platform: CHANNEL },
        );
      }
      if (err instanceof ChannelError) throw err;
      throw new ChannelError(this.describe(err), { cause: err, platform: CHANNEL });
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
  }

  async stop(): Promise<void> {
    await this.shutdown();
  }

  onTurn(event: TurnEvent): void {
    const target = replyTarget(event, false);
    this.typing.onTurn(event, conversationKey(target.chatId, target.threadId), () => target);
  }

  async readyToSend(msg: OutboundMessage): Promise<void> {
    // A typing call still out would land after this message and show "typing…" under it.
    const target = replyTarget(msg, false);
    await this.typing.settle(conversationKey(target.chatId, target.threadId));
  }

  async send(msg: OutboundMessage): Promise<SentMessage | void> {
    await this.readyToSend(msg);
    const target = replyTarget(msg, this.cfg.replyToMessage);
    const key = conversationKey(target.chatId, target.threadId);
    const kind = msg.kind ?? "final";
    let sent: SentMessage | undefined;
    if (kind === "final") await this.sender.reply(target, msg);
    else if (kind === "question") sent = await this.ask(target, msg);
    else if (kind === "edit") await this.rewrite(target, msg);
    else await this.sender.aside(target, msg.content);
    // Telegram hides "typing…" when a message arrives: show it again while a turn still runs there,
    // unless this is that turn's own reply (its turnEnd follows at once).
    if (kind !== "final" || msg.turnId === undefined) this.typing.renew(key);
    return sent;
  }

  /**
   * A streamed reply (preview.ts): drafts in a private chat, an edited message elsewhere. None while
   * the channel is not running. "typing…" runs until the first text shows, then ends for the turn.
   */
  previewSurface(target: PreviewTarget): PreviewSurface | undefined {
    if (!this.sink) return undefined;
    const where = replyTarget(target, this.cfg.replyToMessage);
    const drafts = isPrivateChat(where.chatId, target.metadata) && this.drafts.allowed(where.chatId);
    return new TelegramPreview({
      sender: this.previewSender,
      target: where,
      drafts: drafts ? this.drafts : undefined,
      onFirstText: () => this.typing.end(target.turnId),
    });
  }

  /**
   * The turn's plan (turn-plans.ts): a message of its own, edited in place, never a draft (a draft
   * would vanish when the reply's message comes, and clash with the reply's own draft), quoting
   * nothing. "typing…" goes on: the turn is still at work.
   */
  planSurface(target: PreviewTarget): PreviewSurface | undefined {
    if (!this.sink) return undefined;
    const where = replyTarget(target, false);
    return new TelegramPreview({
      sender: this.previewSender,
      target: where,
      drafts: undefined,
      onFirstText: () => this.typing.settle(conversationKey(where.chatId, where.threadId)),
    });
  }

  /** A question: its text with the choices as buttons; the ref is the message carrying them. */
  private async ask(target: ReplyTarget, msg: OutboundMessage): Promise<SentMessage> {
    const question = msg.question;
    if (!question || question.choices.length === 0) {
      throw new ChannelError("a question message came without choices to show", {
        platform: CHANNEL,
        method: "sendMessage",
        permanent: true,
      });
    }
    const messageId = await this.sender.question(target, msg.content, question);
    this.questionRefs.set(question.id, messageId);
    return { ref: String(messageId) };
  }

  /**
   * An edit: rewrites the question's message (by the ref given, else the one remembered) and takes
   * its buttons away. With neither, the text goes out as a new message, so the chat still learns it.
   */
  private async rewrite(target: ReplyTarget, msg: OutboundMessage): Promise<void> {
    const given = Number(msg.edit?.ref);
    const messageId =
      Number.isInteger(given) && given > 0
        ? given
        : msg.edit
          ? this.questionRefs.get(msg.edit.questionId)
          : undefined;
    if (messageId === undefined) {
      const { replyTo: _noQuote, ...where } = target;
      await this.sender.reply(where, { ...msg, kind: "final" });
      return;
    }
    await this.sender.edit(target, messageId, msg.content);
  }

  private describe(err: unknown): string {
    return describeTelegramError(err, this.apiRoot);
  }

  private async connect(signal: AbortSignal): Promise<void> {
    await this.bot.init(gs(signal));
    const info = this.bot.botInfo;
    this.me = { id: info.id, username: info.username };
    // The command menu is decoration: registered while polling starts, not before it (a round trip
    // less before messages flow), and a failure only warns.
    const menu = this.bot.api.setMyCommands(COMMAND_MENU, {}, gs(signal)).then(
      () => undefined,
      (err: unknown) => {
        if (!signal.aborted)
          this.log.warn({ err }, "could not register the command menu (setMyCommands); commands still work");
      },
    );
    if (this.cfg.mode === "webhook") await this.webhook.start(signal);
    else if (this.leased) this.leased.start();
    else await this.polling.start(signal);
    await menu;
    this.log.info(
      {
        bot: `@${info.username}`,
        mode: this.cfg.mode,
        ...(this.leased ? { ingress: "while holding the lease" } : {}),
      },
      "connected to Telegram",
    );
  }

  /** Everything start() set up, undone; safe to call at any time. */
  private async shutdown(): Promise<void> {
    this.lifetime.abort();
    this.typing.stopAll();
    this.albums.flush();
    const { stopTimeoutMs } = this.tuning;
    await this.leased?.stop(); // the lease goes to another instance
    await this.polling.stop(); // confirms the updates handled so far
    await this.webhook.close(stopTimeoutMs);
    await this.inbound?.settle(stopTimeoutMs);
    this.inbound = null;
    this.sink = null;
  }

  /**
   * A button press. Telegram shows a spinner on the button until the query is answered, so every one
   * is answered: with the sink's notice, with nothing for data that is not ours. The answer goes out
   * in the background so a slow call never holds up the next updates.
   */
  private onPress(query: CallbackQuery): void {
    const notice = this.decide(query);
    const other = notice ? { text: callbackNotice(notice) } : {};
    void this.bot.api
      .answerCallbackQuery(query.id, other, gs(this.lifetime.signal))
      .catch((err: unknown) =>
        this.log.warn({ err: this.describe(err) }, "could not answer a button press (answerCallbackQuery)"),
      );
  }

  /** What the presser is told: the sink's notice, or undefined for a press that is not an answer of ours. */
  private decide(query: CallbackQuery): string | undefined {
    const click = choiceClickOf(query);
    if (!click) {
      this.log.debug({ data: query.data }, "a button press that is not one of our questions; ignored");
      return undefined;
    }
    const sink = this.sink;
    if (!sink?.choose) return NOT_HERE;
    try {
      return sink.choose(click).notice;
    } catch (err) {
      this.log.error({ err, questionId: click.questionId }, "answering a button press failed");
      return "Something went wrong with that answer; please try again.";
    }
  }

  /** The bot's membership changed: a user who blocked it in their private chat is told to the sink, silently. */
  private onMembership(update: ChatMemberUpdated): void {
    const senderId = leftPrivateChat(update);
    if (senderId !== undefined) this.sink?.left?.(senderId);
  }

  private onMessage(msg: Message): void {
    const { me, sink, inbound } = this;
    if (!me || !sink || !inbound) return;
    if (msg.media_group_id) {
      // Only one part of an album carries the caption (and so the @mention): every part is kept and
      // the album goes through if any part passes the group policy.
      const part = mapMessage(msg, me, { groupPolicy: "open", groupAllowFrom: [] });
      if (!part) return;
      const completes = this.albums.add(part, mapMessage(msg, me, this.cfg) !== null, msg.media_group_id);
      if (completes)
        inbound.take(sink, { conversation: part.conversation, inbound: part.inbound, files: [], completes });
      return;
    }
    const mapped = mapMessage(msg, me, this.cfg);
    if (!mapped) return;
    // grammy confirms the update once this handler returns: the inbound path journals what it cannot publish now.
    inbound.take(sink, {
      conversation: mapped.conversation,
      inbound: mapped.inbound,
      files: incomingFiles(mapped.attachments, this.downloads),
      // Never queued behind a download in the same chat: the agent must hear it now.
      urgent: parseCommand(mapped.inbound.content)?.name === "stop",
      // /start is greeted here, not by the agent; a refused sender gets the refusal like any message.
      ...(mapped.isStart ? { answer: () => this.answerStart(mapped.inbound) } : {}),
    });
  }

  private answerStart(inbound: InboundMessage): Promise<void> {
    return this.greet(inbound).catch((err: unknown) => this.log.warn({ err }, "could not greet the user"));
  }

  private async greet(inbound: InboundMessage): Promise<void> {
    const name = this.me ? `@${this.me.username}` : "this bot";
    await this.sender.notice(
      replyTarget(inbound, false),
      `Hello! I'm ${name}, your palaver assistant. Send me a message and I'll answer. ` +
        `Commands: /new saves what this conversation taught me and starts afresh, /stop cancels a reply, ` +
        `/status and /help tell you more. ` +
        `(Your Telegram user id is ${inbound.senderId}.)`,
    );
  }
}
