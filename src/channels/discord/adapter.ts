/**
 * The Discord channel: discord.js wiring only (connection.ts). discord.js's
 * messages and interactions become views (views.ts) for the pure mapping (mapping.ts) and go through the shared
 * inbound path (gate first, then journal, download, transcribe, publish, in
 * order per chat). Replies are formatted by format.ts and posted through the
 * single send point (send.ts). "typing…" is the shared TypingIndicator,
 * driven by turn events (onTurn), never by replies. discord.js's gateway
 * resumes and reconnects by itself; we log what it does. Its REST
 * queue waits out short rate limits; a longer one fails the send with
 * retryAfterMs (rejectOnRateLimit), so the outbox retries and other chats go on.
 *
 * Slash commands (/new /stop /help /status) are registered at ready (bulk
 * overwrite) and answered through the interaction: deferred at once, the
 * first reply edits the deferred response, further chunks are follow-ups. A sender the gate
 * refuses gets the manager's notice (the refusal, or a pairing code) in the same way, deferred
 * ephemeral so that only they see it: Discord wants every interaction answered within 3 s, or it
 * shows "This interaction failed".
 *
 * Questions (approvals, ask_human), their edits and button presses are
 * question-io.ts's business; the adapter routes them there.
 *
 * Streamed replies post a message and edit it (preview.ts); "typing…" ends for the turn when its
 * first text shows. A slash command's turn does not stream: its answer edits the deferred
 * interaction reply once, as it does without streaming (and the commands run no model anyway).
 */
import {
  Events,
  MessageFlags,
  type ChatInputCommandInteraction,
  type Client,
  type Interaction,
  type Message,
} from "discord.js";
import { parseCommand } from "../../bus/commands.js";
import type { InboundMessage, OutboundMessage, TurnEvent } from "../../bus/types.js";
import { logger, type Logger } from "../../log.js";
import { BoundedMap } from "../../util/bounded-map.js";
import { KeyedQueue } from "../../util/keyed-queue.js";
import { TaskSet } from "../../util/task-set.js";
import { ChannelError } from "../../util/errors.js";
import { withTimeout } from "../../util/timeout.js";
import { InboundPath } from "../inbound.js";
import { INGRESS_LEASES, LeasedIngress, type IngressLease } from "../ingress-lease.js";
import type { ChannelFactoryContext } from "../platform.js";
import { transcriberFor, type Transcriber } from "../transcription.js";
import { TypingIndicator } from "../typing.js";
import type { Channel, InboundSink, PreviewSurface, PreviewTarget, SentMessage } from "../types.js";
import { incomingFiles } from "./attachments.js";
import { discordProblems, NANOBOT_GATEWAY_URL, type DiscordConfig } from "../../config/platforms/discord.js";
import { closeConnection, connect, openConnection, type DiscordConnection } from "./connection.js";
import { describeConnectError, intentWarnings } from "./diagnostics.js";
import { discordChunks, outgoingMessages } from "./format.js";
import { discordPreviewSurface, editedMessageId } from "./preview.js";
import { DiscordQuestions } from "./question-io.js";
import {
  admitInteraction,
  admitMessage,
  CHANNEL,
  interactionToInbound,
  SLASH_COMMANDS,
  toInbound,
  type DiscordPolicy,
} from "./mapping.js";
import { ALLOWED_MENTIONS, DiscordSender, outgoing, type PendingInteraction } from "./send.js";
import { interactionView, messageView, type ChannelLike } from "./views.js";

export interface DiscordChannelOptions {
  config: DiscordConfig;
  workspace: string;
  /** channels.maxMediaBytes: attachments above it are not downloaded. */
  maxMediaBytes: number;
  /** Voice messages and audio files are transcribed through it; null/absent: not transcribed. */
  transcriber?: Transcriber | null;
  log?: Logger;
  /** Renewal of the typing indicator: Discord shows it ~10 s after each signal. */
  typingIntervalMs?: number;
  /** The typing indicator never runs longer than this without a new turn. */
  typingMaxMs?: number;
  /**
   * The longest rate-limit wait discord.js's REST client may do inside a send; a longer one fails the send with
   * retryAfterMs so the outbox retries it later and the chat's queue is not stuck in the SDK.
   */
  maxRateLimitWaitMs?: number;
  /** How start() waits for login and READY before rejecting. */
  connectTimeoutMs?: number;
  downloadTimeoutMs?: number;
  /** How long a refused sender's slash command waits for the manager's notice before it is answered without one. */
  refusalNoticeWaitMs?: number;
  /**
   * Cluster mode: the gateway connection (messages and interactions in) runs only while this lease
   * is held; every instance sends. Absent: the connection always runs.
   */
  lease?: IngressLease;
}

/** Discord shows "typing…" for ~10 s after each signal: renew a little before it fades. */
const TYPING_INTERVAL_MS = 8000;
const TYPING_MAX_MS = 10 * 60_000;
const MAX_RATE_LIMIT_WAIT_MS = 5000;
/** Interaction tokens live 15 minutes; stop using them a little earlier. */
const INTERACTION_TTL_MS = 14 * 60_000;
const MAX_INTERACTIONS = 1000;
/** Preview messages remembered so their edits' rate limits come back to the live preview. */
const MAX_PREVIEW_MESSAGES = 1000;
const STOP_WAIT_MS = 5000;
const REFERENCE_FETCH_TIMEOUT_MS = 5000;
/**
 * A refused sender's command is deferred at once and answered with the manager's notice, which
 * follows within milliseconds; none comes when the sender was told within the hour (or their chat
 * is closed to strangers), and then the command is answered with NO_NOTICE after this long.
 */
const REFUSAL_NOTICE_WAIT_MS = 5000;
const NO_NOTICE = "Sorry, I can't take commands from you here.";

/** A live connection: the sender's context. */
interface Live {
  connection: DiscordConnection;
  client: Client<true>;
}

/** The registry's factory: `discord: async (ctx) => (await import("./discord/adapter.js")).createDiscordChannel(ctx)`. */
// eslint-disable-next-line @typescript-eslint/require-await -- the registry's factories are async; a throw becomes a rejection
export async function createDiscordChannel(ctx: ChannelFactoryContext): Promise<Channel> {
  return new DiscordChannel(discordOptionsFrom(ctx));
}

export function discordOptionsFrom(ctx: ChannelFactoryContext): DiscordChannelOptions {
  const config = ctx.config.channels.discord;
  const problems = discordProblems(config);
  if (problems.length > 0) throw new ChannelError(problems.join("; "), { platform: CHANNEL });
  const lease = ctx.gateway?.lease?.(INGRESS_LEASES.discord);
  return {
    config,
    workspace: ctx.workspace,
    maxMediaBytes: ctx.config.channels.maxMediaBytes,
    transcriber: transcriberFor(ctx.config, ctx.log),
    ...(lease ? { lease } : {}),
  };
}

export class DiscordChannel implements Channel {
  readonly name = CHANNEL;
  private live: Live | null = null;
  /** Cluster mode: a client never logged in, whose REST client sends while another instance has the gateway. */
  private restOnly: DiscordConnection | null = null;
  /** Cluster mode: the gateway connection runs while this instance holds the lease. */
  private readonly leased: LeasedIngress | null;
  private sink: InboundSink | null = null;
  private inbound: InboundPath | null = null;
  private life = new AbortController();
  private readonly log: Logger;
  private readonly sender: DiscordSender;
  private readonly typing: TypingIndicator<string>;
  private readonly tasks = new TaskSet();
  /** Messages of a chat become views one after the other, so a slow one (a reply to fetch) cannot be overtaken. */
  private readonly arrivals = new KeyedQueue();
  private interactions = new BoundedMap<string, PendingInteraction>(MAX_INTERACTIONS, INTERACTION_TTL_MS);
  /** Slash commands taken by the inbound path, deferred once the gate let them in. */
  private readonly toDefer = new WeakMap<InboundMessage, ChatInputCommandInteraction>();
  /** Refused senders' commands waiting for the manager's notice (see REFUSAL_NOTICE_WAIT_MS). */
  private readonly noticeTimers = new Set<NodeJS.Timeout>();
  /** Ids of the messages that show streamed replies and plans (see previewSurface, planSurface). */
  private readonly previewMessages = new BoundedMap<string, true>(MAX_PREVIEW_MESSAGES);
  /** Questions asked, edited and answered; what it remembers is kept across stop/start. */
  private readonly questions: DiscordQuestions;

  constructor(private readonly opts: DiscordChannelOptions) {
    this.log = opts.log ?? logger("discord");
    this.sender = new DiscordSender(() => this.live?.client ?? this.restOnly?.client ?? null);
    this.leased = opts.lease
      ? new LeasedIngress({
          lease: opts.lease,
          what: "the Discord gateway connection",
          begin: (signal) => this.goLive(AbortSignal.any([signal, this.life.signal])),
          end: () => this.goOffline(),
          log: this.log,
        })
      : null;
    this.questions = new DiscordQuestions(this.sender, this.log);
    this.typing = new TypingIndicator<string>({
      signal: (chatId) => this.sender.typing(chatId),
      intervalMs: opts.typingIntervalMs ?? TYPING_INTERVAL_MS,
      maxMs: opts.typingMaxMs ?? TYPING_MAX_MS,
      log: this.log,
    });
    const { gatewayUrl, intents } = opts.config;
    if (gatewayUrl && gatewayUrl !== NANOBOT_GATEWAY_URL) {
      this.log.warn(
        "channels.discord.gatewayUrl is not used: the gateway address is asked from the API (channels.discord.apiUrl)",
      );
    }
    for (const warning of intentWarnings(intents)) this.log.warn(warning);
  }

  async start(sink: InboundSink, signal: AbortSignal): Promise<void> {
    if (this.live || this.restOnly) return;
    this.sink = sink;
    this.life = new AbortController();
    this.inbound = new InboundPath({
      signal: this.life.signal,
      maxMediaBytes: this.opts.maxMediaBytes,
      transcriber: this.opts.transcriber ?? null,
      notify: async (msg, text) => {
        await this.sender.toChannel(msg.chatId, outgoingMessages(discordChunks(text), []));
      },
      onAccepted: (msg) => this.deferInteraction(msg),
      log: this.log,
    });
    if (!this.leased) return this.goLive(signal);
    // Cluster mode: this instance sends at once (REST needs only the token); the gateway connection,
    // which brings the messages in, runs only while it holds the lease.
    this.restOnly = this.openConnection();
    this.restOnly.client.rest.setToken(this.opts.config.token);
    this.leased.start();
    this.log.info(
      "Discord: sending over REST; the gateway connection runs while this instance holds the lease",
    );
  }

  async stop(): Promise<void> {
    this.life.abort();
    this.typing.stopAll();
    for (const timer of this.noticeTimers) clearTimeout(timer);
    this.noticeTimers.clear();
    await this.leased?.stop();
    this.sink = null;
    await this.goOffline();
    const restOnly = this.restOnly;
    this.restOnly = null;
    if (restOnly) await closeConnection(restOnly).catch(() => undefined);
    await this.tasks.settle(STOP_WAIT_MS);
    await this.inbound?.settle(STOP_WAIT_MS);
    this.inbound = null;
    this.interactions = new BoundedMap(MAX_INTERACTIONS, INTERACTION_TTL_MS);
  }

  /** A client of discord.js with palaver's options; not connected. */
  private openConnection(): DiscordConnection {
    const { token, intents, apiUrl } = this.opts.config;
    const maxWaitMs = this.opts.maxRateLimitWaitMs ?? MAX_RATE_LIMIT_WAIT_MS;
    return openConnection({
      token,
      intents,
      apiUrl,
      // A short wait is queued inside discord.js's REST client; a longer one becomes a RateLimitError
      // at once, and so does any wait for a preview's edit: the live preview sends newer text after it.
      rejectOnRateLimit: (limit) => limit.retryAfter > maxWaitMs || this.isPreviewEdit(limit),
      log: this.log,
    });
  }

  /** Opens the gateway connection: messages and interactions come in through it. */
  private async goLive(signal: AbortSignal): Promise<void> {
    const connection = this.openConnection();
    // Handlers are on before connecting; what arrives before ready is not acted on (no bot id yet).
    this.attach(connection);
    let client: Client<true>;
    try {
      client = await connect(connection, signal, this.opts.connectTimeoutMs ?? 60_000);
    } catch (err) {
      await closeConnection(connection).catch(() => undefined);
      throw new ChannelError(describeConnectError(err, connection.state.closeCode, this.opts.config.apiUrl), {
        cause: err,
        platform: CHANNEL,
      });
    }
    this.live = { connection, client };
    await this.registerCommands(client);
    this.log.info(
      { bot: client.user.username, botId: client.user.id, guilds: client.guilds.cache.size },
      "connected to Discord",
    );
  }

  /** Closes the gateway connection (if open); sending goes on through the REST-only client, if any. */
  private async goOffline(): Promise<void> {
    const live = this.live;
    this.live = null;
    if (live)
      await closeConnection(live.connection).catch((err: unknown) =>
        this.log.warn({ err }, "closing the Discord connection failed"),
      );
  }

  /** Whether replies can go out: connected, or (cluster mode) sending over REST. */
  private get sending(): boolean {
    return this.live !== null || this.restOnly !== null;
  }

  onTurn(event: TurnEvent): void {
    // A thread is a channel of its own on Discord: the chat id is the whole conversation key.
    this.typing.onTurn(event, event.chatId, () => event.chatId);
  }

  /** Whether "typing…" runs in this chat (a turn there has not ended). */
  isTyping(chatId: string): boolean {
    return this.typing.isActive(chatId);
  }

  async readyToSend(msg: OutboundMessage): Promise<void> {
    // A typing signal still out would land after this message and show "typing…" under it.
    await this.typing.settle(msg.chatId);
  }

  async send(msg: OutboundMessage): Promise<SentMessage | void> {
    if (!this.sending) throw new ChannelError("Discord is not connected", { platform: CHANNEL });
    const kind = msg.kind ?? "final";
    const final = kind === "final";
    await this.readyToSend(msg);
    let sent: SentMessage | undefined;
    if (kind === "question") sent = await this.questions.ask(msg);
    else if (kind === "edit") await this.questions.edit(msg);
    else if (!(await this.post(msg, final))) return;
    // Discord hides "typing…" when the bot posts: show it again while a turn still runs here,
    // unless this is that turn's own reply (its turnEnd follows at once).
    if (!final || msg.turnId === undefined) this.typing.renew(msg.chatId);
    return sent;
  }

  /**
   * Where a streamed reply shows while it is written: a message of the chat (or thread), edited as
   * the text grows. None for a slash command's turn (see the header) or while disconnected.
   */
  previewSurface(target: PreviewTarget): PreviewSurface | undefined {
    if (!this.sending || target.interactionId !== undefined) return undefined;
    const { chatId, turnId } = target;
    const replyTo = this.opts.config.replyToMessage ? target.replyTo : undefined;
    return discordPreviewSurface(
      {
        post: async (text, quote) => {
          const id = await this.sender.postText(chatId, text, quote);
          this.previewMessages.set(id, true);
          return id;
        },
        edit: (id, text) => this.sender.editMessage(chatId, id, text),
        // Ended (its signal still out waited for) before the post: a signal landing after the
        // preview would show "typing…" under it for 10 s.
        beforeFirstPost: () => this.typing.end(turnId),
      },
      replyTo,
    );
  }

  /**
   * The turn's plan (turn-plans.ts): a message of its own in the chat, edited in place, quoting
   * nothing; "typing…" goes on. None for a slash command's turn: there each changed checklist is a
   * follow-up of the interaction (send).
   */
  planSurface(target: PreviewTarget): PreviewSurface | undefined {
    if (!this.sending || target.interactionId !== undefined) return undefined;
    const { chatId } = target;
    return discordPreviewSurface(
      {
        post: async (text) => {
          const id = await this.sender.postText(chatId, text, undefined);
          // Paced like a preview: a rate-limited edit waits in the live preview, not in discord.js.
          this.previewMessages.set(id, true);
          // Discord hides "typing…" when the bot posts; the turn is still at work.
          this.typing.renew(chatId);
          return id;
        },
        edit: (id, text) => this.sender.editMessage(chatId, id, text),
        beforeFirstPost: () => this.typing.settle(chatId),
      },
      undefined,
    );
  }

  /** A reply, progress or hint; false when there was nothing to post. */
  private async post(msg: OutboundMessage, final: boolean): Promise<boolean> {
    const messages = await outgoing(msg.content, msg.media ?? []);
    if (messages.length === 0) return false;
    const pending = this.pendingInteraction(msg.interactionId);
    const rest = pending ? await this.sender.toInteraction(pending, messages) : messages;
    if (pending && (final || pending.gone)) this.interactions.delete(pending.interaction.id);
    if (pending?.gone && rest.length > 0) {
      // What was meant for the sender alone (a refusal, a pairing code) is not for the whole channel.
      const where = pending.ephemeral ? "dropped: it was for the sender alone" : "answering in the channel";
      this.log.warn(
        { command: pending.interaction.commandName, chatId: msg.chatId },
        `the slash command's interaction has expired; ${where}`,
      );
      if (pending.ephemeral) return true;
    }
    if (rest.length > 0) {
      const replyTo = final && this.opts.config.replyToMessage ? msg.replyTo : undefined;
      await this.sender.toChannel(msg.chatId, rest, { replyTo });
    }
    return true;
  }

  private isPreviewEdit(limit: { method: string; url: string }): boolean {
    const id = editedMessageId(limit);
    return id !== undefined && this.previewMessages.has(id);
  }

  /** The events the adapter acts on, once ready (before it there is no bot id to judge them by). */
  private attach(connection: DiscordConnection): void {
    const { client } = connection;
    client.on(Events.MessageCreate, (message) => {
      if (connection.state.ready) this.onMessage(message);
    });
    client.on(Events.InteractionCreate, (interaction) => {
      if (connection.state.ready) this.track(this.onInteraction(interaction));
    });
  }

  private policy(): DiscordPolicy {
    const { groupPolicy, groupAllowFrom } = this.opts.config;
    return { botId: this.live?.client.user.id ?? "", groupPolicy, groupAllowFrom };
  }

  /** The chat's place in line is taken now, so a message that takes longer to look at cannot overtake. */
  private onMessage(message: Message): void {
    this.track(this.arrivals.run(message.channelId, () => this.takeMessage(message)));
  }

  private async takeMessage(message: Message): Promise<void> {
    const policy = this.policy();
    // Nothing is looked up for a bot's message (our own echoes included): it is refused anyway.
    const person = !message.author.bot && !message.webhookId;
    const view = messageView(
      message,
      person && message.guildId ? await this.channelOf(message.channelId) : null,
      person ? await this.referenced(message) : null,
    );
    const admission = admitMessage(view, policy);
    if (!admission.accept) {
      this.log.debug(
        { messageId: view.id, chatId: view.channelId, reason: admission.reason },
        "message ignored",
      );
      return;
    }
    if (!this.sink || !this.inbound || this.life.signal.aborted) return;
    const inbound = toInbound(view, policy);
    this.inbound.take(this.sink, {
      conversation: view.channelId,
      inbound,
      files: incomingFiles(view, {
        workspace: this.opts.workspace,
        maxMediaBytes: this.opts.maxMediaBytes,
        timeoutMs: this.opts.downloadTimeoutMs,
      }),
      // /stop is answered before whatever of this chat is still being downloaded.
      urgent: parseCommand(inbound.content)?.name === "stop",
    });
  }

  /** A server channel or thread (a thread names its parent): from discord.js's cache, else the API. */
  private async channelOf(channelId: string): Promise<ChannelLike | null> {
    const client = this.live?.client;
    if (!client) return null;
    return client.channels.fetch(channelId).catch((err: unknown) => {
      this.log.debug({ err, channelId }, "could not look up a Discord channel");
      return null;
    });
  }

  /**
   * The message replied to: Discord sends it along with the reply and discord.js keeps it in the
   * channel's cache, so it is fetched only when it did not come (bounded, and null when it cannot be).
   */
  private async referenced(message: Message): Promise<Message | null> {
    if (!message.reference?.messageId) return null;
    return withTimeout(
      message.fetchReference(),
      REFERENCE_FETCH_TIMEOUT_MS,
      "fetching a replied-to message",
    ).catch(() => null);
  }

  private async onInteraction(interaction: Interaction): Promise<void> {
    if (interaction.isButton()) return this.questions.press(interaction, this.sink);
    if (!interaction.isChatInputCommand()) return;
    const policy = this.policy();
    const view = interactionView(interaction);
    const admission = admitInteraction(view, policy);
    if (!admission.accept) {
      this.log.debug({ command: view.commandName, reason: admission.reason }, "slash command refused");
      await this.sender
        .call("interactionReply", () =>
          interaction.reply({
            content: refusalText(admission.reason),
            flags: MessageFlags.Ephemeral,
            allowedMentions: ALLOWED_MENTIONS,
          }),
        )
        .catch((err: unknown) => this.log.warn({ err }, "could not answer a slash command"));
      return;
    }
    if (!this.sink || !this.inbound) return;
    const inbound = interactionToInbound(view);
    // Deferred ("thinking…") only once the gate lets the sender in (onAccepted).
    this.toDefer.set(inbound, interaction);
    this.inbound.take(this.sink, {
      conversation: view.channelId,
      inbound,
      files: [],
      urgent: view.commandName === "stop",
    });
    // Not taken: the gate refused the sender, and the manager's notice (a refusal, a pairing code)
    // is on its way to send() with this interaction's id. Deferred now, so it is in time.
    if (this.toDefer.has(inbound)) {
      this.toDefer.delete(inbound);
      this.defer(interaction, true);
      this.answerIfNoNotice(interaction.id);
    }
  }

  /** Discord wants an answer within 3 s; the turn may take longer, so a slash command is deferred at once. */
  private deferInteraction(msg: InboundMessage): void {
    const interaction = this.toDefer.get(msg);
    if (!interaction || !this.live) return;
    this.toDefer.delete(msg);
    this.defer(interaction, false);
  }

  /** Defers the answer ("thinking…"); ephemeral: only the sender sees it, and what replaces it. */
  private defer(interaction: ChatInputCommandInteraction, ephemeral: boolean): void {
    const deferred = this.sender
      .call("deferInteractionReply", () =>
        interaction.deferReply(ephemeral ? { flags: MessageFlags.Ephemeral } : {}),
      )
      .then(
        () => true,
        (err: unknown) => {
          this.log.warn({ err, command: interaction.commandName }, "could not defer the slash command reply");
          return false;
        },
      );
    this.interactions.set(interaction.id, { interaction, ephemeral, deferred, answered: false });
  }

  /** A refused sender's command gets NO_NOTICE when the manager sends no notice for it. */
  private answerIfNoNotice(interactionId: string): void {
    const timer = setTimeout(() => {
      this.noticeTimers.delete(timer);
      const pending = this.interactions.get(interactionId);
      if (!pending || pending.answered) return;
      this.interactions.delete(interactionId);
      this.track(
        this.sender
          .toInteraction(pending, [{ content: NO_NOTICE }])
          // Not posted in the channel when the interaction is gone: the refusal was meant for the sender alone.
          .then(() => undefined)
          .catch((err: unknown) => this.log.warn({ err }, "could not answer a refused slash command")),
      );
    }, this.opts.refusalNoticeWaitMs ?? REFUSAL_NOTICE_WAIT_MS);
    this.noticeTimers.add(timer);
  }

  private pendingInteraction(id: string | undefined): PendingInteraction | undefined {
    return id === undefined ? undefined : this.interactions.get(id);
  }

  private async registerCommands(client: Client<true>): Promise<void> {
    try {
      await client.application.commands.set(
        SLASH_COMMANDS.map((c) => ({ name: c.name, description: c.description })),
      );
      this.log.debug({ commands: SLASH_COMMANDS.length }, "slash commands registered");
    } catch (err) {
      // Typed commands still work; only the / menu is missing.
      this.log.warn({ err }, "could not register the slash commands with Discord");
    }
  }

  private track(task: Promise<void>): void {
    void this.tasks.add(
      task.catch((err: unknown) => this.log.error({ err }, "Discord event handling failed")),
    );
  }
}

function refusalText(reason: string): string {
  return reason === "channel not in groupAllowFrom"
    ? "I don't answer in this channel. Ask me in a DM, or in a channel listed in channels.discord.groupAllowFrom."
    : "I can't do that here.";
}
