/**
 * The Discord channel: discord.js wiring only. Events become views for the
 * pure mapping (mapping.ts); replies are formatted by format.ts and sent
 * through discord.js, whose REST queue handles rate limits (429) and whose
 * gateway client resumes and reconnects by itself; we log what it does.
 *
 * Slash commands (/new /stop /help /status) are registered at ready (bulk
 * overwrite) and answered through the interaction: deferred at once, the
 * first reply edits the deferred response, further chunks are follow-ups.
 */
import { stat } from "node:fs/promises";
import { reservedForm } from "../inbound.js";
import { basename } from "node:path";
import {
  Client,
  Events,
  MessageFlags,
  Partials,
  RESTEvents,
  type ChatInputCommandInteraction,
  type ClientOptions,
  type Interaction,
  type Message,
  type User,
} from "discord.js";
import type { InboundMessage, OutboundMessage } from "../../bus/types.js";
import { parseCommand } from "../../bus/commands.js";
import { logger, type Logger } from "../../log.js";
import { ChannelError, errorMessage } from "../../util/errors.js";
import { isAllowed } from "../access.js";
import { downloadFile, formatBytes, mediaPath, MediaTooLargeError } from "../media.js";
import type { ChannelFactoryContext } from "../registry.js";
import type { Channel, InboundReservation, InboundSink } from "../types.js";
import { NANOBOT_GATEWAY_URL, type DiscordConfig } from "./config.js";
import { describeCloseCode, describeConnectError, intentWarnings } from "./diagnostics.js";
import { discordChunks, outgoingMessages, type OutgoingMessage } from "./format.js";
import {
  admitInteraction,
  admitMessage,
  attachmentNote,
  CHANNEL,
  interactionToInbound,
  SLASH_COMMANDS,
  toInbound,
  type DiscordAttachmentView,
  type DiscordInteractionView,
  type DiscordMessageView,
  type DiscordPolicy,
  type DiscordUserView,
} from "./mapping.js";
import { TypingIndicator } from "./typing.js";

export interface DiscordChannelOptions {
  config: DiscordConfig;
  workspace: string;
  /** channels.maxMediaBytes: attachments above it are not downloaded. */
  maxMediaBytes: number;
  log?: Logger;
  /** Renewal of the typing indicator (Discord shows it ~10 s). */
  typingIntervalMs?: number;
  /** The typing indicator never runs longer than this for one wait. */
  typingMaxMs?: number;
  /** How long start() waits for login and READY before rejecting. */
  connectTimeoutMs?: number;
  downloadTimeoutMs?: number;
}

/** Interaction tokens live 15 minutes; stop using them a little earlier. */
const INTERACTION_TTL_MS = 14 * 60_000;
const MAX_INTERACTIONS = 1000;
const REFERENCE_FETCH_TIMEOUT_MS = 5000;
const STOP_WAIT_MS = 5000;

/** What the event handlers of one client know about its connection. */
interface ConnectionState {
  ready: boolean;
  stopping: boolean;
  /** The last gateway close code discord.js does not recover from. */
  closeCode: number | null;
}

/** A message ready for the bus, and whether to show typing until its answer. */
interface Prepared {
  msg: InboundMessage;
  showTyping: boolean;
  /** Set when the message was journaled before its attachments were downloaded. */
  reservation?: InboundReservation;
}

interface PendingInteraction {
  interaction: ChatInputCommandInteraction;
  /** Resolves true once the deferred response is acknowledged, false when deferring failed. */
  deferred: Promise<boolean>;
  answered: boolean;
  expiresAt: number;
}

/** The registry's factory: `discord: async (ctx) => (await import("./discord/adapter.js")).createDiscordChannel(ctx)`. */
// eslint-disable-next-line @typescript-eslint/require-await -- the registry's factories are async; a throw becomes a rejection
export async function createDiscordChannel(ctx: ChannelFactoryContext): Promise<Channel> {
  return new DiscordChannel(discordOptionsFrom(ctx));
}

export function discordOptionsFrom(ctx: ChannelFactoryContext): DiscordChannelOptions {
  const config = ctx.config.channels.discord;
  if (!config.token.trim()) {
    throw new ChannelError(
      "channels.discord.token is empty: create a bot in the Discord Developer Portal (Bot → Reset Token) and put its token there",
    );
  }
  return { config, workspace: ctx.workspace, maxMediaBytes: ctx.config.channels.maxMediaBytes };
}

export class DiscordChannel implements Channel {
  readonly name = CHANNEL;
  private client: Client | null = null;
  private connection: ConnectionState | null = null;
  private sink: InboundSink | null = null;
  private life = new AbortController();
  private readonly log: Logger;
  private readonly typing: TypingIndicator;
  private readonly tasks = new Set<Promise<unknown>>();
  private readonly interactions = new Map<string, PendingInteraction>();
  /** Per-chat tail of the publish chain, so messages whose attachments download slowly keep their order. */
  private readonly publishing = new Map<string, Promise<void>>();

  constructor(private readonly opts: DiscordChannelOptions) {
    this.log = opts.log ?? logger("discord");
    this.typing = new TypingIndicator({
      send: (chatId) => this.sendTyping(chatId),
      intervalMs: opts.typingIntervalMs,
      maxMs: opts.typingMaxMs,
      log: this.log,
    });
    const { gatewayUrl, intents } = opts.config;
    if (gatewayUrl && gatewayUrl !== NANOBOT_GATEWAY_URL) {
      this.log.warn(
        "channels.discord.gatewayUrl is not used: discord.js asks the API (channels.discord.apiUrl) for the gateway address",
      );
    }
    for (const warning of intentWarnings(intents)) this.log.warn(warning);
  }

  async start(sink: InboundSink, signal: AbortSignal): Promise<void> {
    if (this.client) return;
    this.sink = sink;
    this.life = new AbortController();
    const client = new Client(this.clientOptions());
    const connection: ConnectionState = { ready: false, stopping: false, closeCode: null };
    this.attach(client, connection);
    try {
      await connect(client, this.opts.config.token, signal, this.opts.connectTimeoutMs ?? 60_000);
    } catch (err) {
      connection.stopping = true;
      await client.destroy().catch(() => undefined);
      throw new ChannelError(describeConnectError(err, connection.closeCode, this.opts.config.apiUrl), {
        cause: err,
      });
    }
    connection.ready = true;
    this.client = client;
    this.connection = connection;
    await this.registerCommands(client);
    this.log.info(
      { bot: client.user?.tag, botId: client.user?.id, guilds: client.guilds.cache.size },
      "connected to Discord",
    );
  }

  async stop(): Promise<void> {
    this.life.abort();
    this.typing.stopAll();
    const client = this.client;
    if (this.connection) this.connection.stopping = true;
    this.client = null;
    this.connection = null;
    this.sink = null;
    if (client)
      await client.destroy().catch((err: unknown) => this.log.warn({ err }, "Discord client destroy failed"));
    await settle([...this.tasks], STOP_WAIT_MS);
    this.interactions.clear();
    this.publishing.clear();
  }

  async send(msg: OutboundMessage): Promise<void> {
    const client = this.client;
    if (!client) throw new ChannelError("Discord is not connected");
    const final = (msg.kind ?? "final") === "final";
    // Stop before sending, so no typing signal lands after the reply.
    if (final) this.typing.end(msg.chatId);
    const { files, missing } = await existingFiles(msg.media ?? []);
    const notes = missing.map((f) => `(file not found: ${basename(f)})`);
    const content = [msg.content, ...notes].filter((s) => s.trim() !== "").join("\n\n");
    const messages = outgoingMessages(discordChunks(content), files);
    if (messages.length === 0) return;

    const pending = this.pendingInteraction(msg.metadata);
    if (pending && (await this.answerInteraction(pending, messages))) {
      if (final) this.interactions.delete(pending.interaction.id);
      return;
    }
    const replyTo = final && this.opts.config.replyToMessage ? msg.replyTo : undefined;
    await this.sendToChannel(client, msg.chatId, messages, replyTo);
    if (!final) this.typing.renew(msg.chatId);
  }

  private clientOptions(): ClientOptions {
    const { intents, apiUrl } = this.opts.config;
    return {
      intents,
      // Without the Channel partial, DMs (whose channel is not cached) are silently dropped.
      partials: [Partials.Channel],
      // The bot never pings @everyone or roles, whatever the model writes.
      allowedMentions: { parse: ["users"], repliedUser: true },
      ...(apiUrl ? { rest: { api: apiUrl.replace(/\/+$/, "") } } : {}),
    };
  }

  private attach(client: Client, connection: ConnectionState): void {
    client.on(Events.MessageCreate, (message) => this.onMessage(client, message));
    client.on(Events.InteractionCreate, (interaction) => this.track(this.onInteraction(client, interaction)));
    client.on(Events.ShardReconnecting, (shard) => {
      if (!connection.stopping)
        this.log.warn({ shard }, "Discord gateway connection lost; discord.js is reconnecting");
    });
    client.on(Events.ShardResume, (shard, replayed) =>
      this.log.info({ shard, replayed }, "Discord gateway session resumed; missed events replayed"),
    );
    client.on(Events.ShardReady, (shard) => {
      if (connection.ready) this.log.info({ shard }, "Discord gateway reconnected with a new session");
    });
    client.on(Events.ShardDisconnect, ({ code }, shard) => {
      connection.closeCode = code;
      const why = describeCloseCode(code) ?? `Discord closed the gateway connection (code ${code})`;
      if (connection.ready && !connection.stopping) {
        this.log.error({ shard, code }, `${why}; the bot is offline until palaver restarts`);
      }
    });
    client.on(Events.ShardError, (err, shard) => this.log.warn({ err, shard }, "Discord gateway error"));
    client.on(Events.Error, (err) => this.log.error({ err }, "Discord client error"));
    client.on(Events.Warn, (message) => this.log.warn(message));
    client.on(Events.Debug, (message) => this.log.trace(message));
    client.rest.on(RESTEvents.RateLimited, (info) =>
      this.log.info(
        { route: info.route, retryAfterMs: info.retryAfter, global: info.global },
        "Discord rate limit hit; discord.js queues the request and retries",
      ),
    );
  }

  private policy(client: Client): DiscordPolicy | null {
    const botId = client.user?.id;
    if (!botId) return null;
    const { groupPolicy, groupAllowFrom } = this.opts.config;
    return { botId, groupPolicy, groupAllowFrom };
  }

  /** The chat's place in line is taken now, so a message that takes longer to prepare cannot overtake. */
  private onMessage(client: Client, message: Message): void {
    this.publishInOrder(message.channelId, this.prepareMessage(client, message));
  }

  private async prepareMessage(client: Client, message: Message): Promise<Prepared | null> {
    const policy = this.policy(client);
    if (!policy) return null;
    const view = await messageView(message);
    const admission = admitMessage(view, policy);
    if (!admission.accept) {
      this.log.debug(
        { messageId: view.id, chatId: view.channelId, reason: admission.reason },
        "message ignored",
      );
      return null;
    }
    const draft = toInbound(view, policy);
    // Files of senders who are not let in are not fetched; the manager still tells them how to get in.
    const allowed = isAllowed(draft, this.opts.config.allowFrom);
    if (!(allowed && view.attachments.length)) return { msg: draft, showTyping: allowed };
    // Discord never sends a message again: journal it before the slow downloads.
    const reservation = this.sink?.reserve?.(reservedForm(draft));
    return { msg: await this.withAttachments(view, policy), showTyping: allowed, reservation };
  }

  private async withAttachments(view: DiscordMessageView, policy: DiscordPolicy): Promise<InboundMessage> {
    const media: string[] = [];
    const notes: string[] = [];
    for (const attachment of view.attachments) {
      try {
        media.push(await this.download(attachment));
      } catch (err) {
        const problem =
          err instanceof MediaTooLargeError
            ? `it is larger than the ${formatBytes(err.limitBytes)} limit`
            : `the download failed (${errorMessage(err)})`;
        this.log.warn(
          { err, attachment: attachment.name, chatId: view.channelId },
          "attachment not downloaded",
        );
        notes.push(attachmentNote(attachment.name, problem));
      }
    }
    return toInbound(view, policy, { media, notes });
  }

  private download(attachment: DiscordAttachmentView): Promise<string> {
    return downloadFile({
      url: attachment.url,
      dest: mediaPath(this.opts.workspace, CHANNEL, attachment.name || `attachment-${attachment.id}`),
      maxBytes: this.opts.maxMediaBytes,
      expectedBytes: attachment.size,
      timeoutMs: this.opts.downloadTimeoutMs,
      signal: this.life.signal,
    });
  }

  private publishInOrder(chatId: string, prepared: Promise<Prepared | null>): void {
    // Handled at once, so a failure while earlier messages are still in line is never an unhandled rejection.
    const ready = prepared.catch((err: unknown) => {
      this.log.error({ err, chatId }, "Discord message could not be handed on");
      return null;
    });
    const previous = this.publishing.get(chatId) ?? Promise.resolve();
    const next = previous
      .then(() => ready)
      .then((item) => {
        if (!item || this.life.signal.aborted || !this.sink) return;
        // /stop is answered at once and ends no wait of its own; everything else gets a final reply.
        if (item.showTyping && parseCommand(item.msg.content)?.name !== "stop") this.typing.begin(chatId);
        if (item.reservation) item.reservation.publish(item.msg);
        else this.sink.publishInbound(item.msg);
      });
    this.publishing.set(chatId, next);
    this.track(next);
    void next.finally(() => {
      if (this.publishing.get(chatId) === next) this.publishing.delete(chatId);
    });
  }

  private async onInteraction(client: Client, interaction: Interaction): Promise<void> {
    if (!interaction.isChatInputCommand()) return;
    const policy = this.policy(client);
    if (!policy) return;
    const view = interactionView(interaction);
    const admission = admitInteraction(view, policy);
    if (!admission.accept) {
      this.log.debug({ command: view.commandName, reason: admission.reason }, "slash command refused");
      await interaction
        .reply({ content: refusalText(admission.reason), flags: MessageFlags.Ephemeral })
        .catch((err: unknown) => this.log.warn({ err }, "could not answer a slash command"));
      return;
    }
    const inbound = interactionToInbound(view);
    if (!isAllowed(inbound, this.opts.config.allowFrom)) {
      // No "thinking…" for a refused sender: the manager tells them how to get in (at most
      // once an hour, in the chat); their other commands go unanswered, as their messages do.
      this.publishInOrder(view.channelId, Promise.resolve({ msg: inbound, showTyping: false }));
      return;
    }
    // Discord wants an answer within 3 s; the turn may take longer, so defer at once.
    const deferred = interaction.deferReply().then(
      () => true,
      (err: unknown) => {
        this.log.warn({ err, command: view.commandName }, "could not defer the slash command reply");
        return false;
      },
    );
    this.rememberInteraction({
      interaction,
      deferred,
      answered: false,
      expiresAt: Date.now() + INTERACTION_TTL_MS,
    });
    this.publishInOrder(view.channelId, Promise.resolve({ msg: inbound, showTyping: false }));
  }

  private rememberInteraction(pending: PendingInteraction): void {
    const now = Date.now();
    for (const [id, entry] of this.interactions) if (entry.expiresAt <= now) this.interactions.delete(id);
    if (this.interactions.size >= MAX_INTERACTIONS) {
      const oldest = this.interactions.keys().next().value;
      if (oldest !== undefined) this.interactions.delete(oldest);
    }
    this.interactions.set(pending.interaction.id, pending);
  }

  private pendingInteraction(metadata: Record<string, unknown> | undefined): PendingInteraction | null {
    const id = metadata?.interactionId;
    if (typeof id !== "string") return null;
    const pending = this.interactions.get(id);
    if (!pending) return null;
    if (pending.expiresAt <= Date.now()) {
      this.interactions.delete(id);
      return null;
    }
    return pending;
  }

  /** False when the interaction cannot be used (deferring failed): the caller sends to the channel instead. */
  private async answerInteraction(
    pending: PendingInteraction,
    messages: OutgoingMessage[],
  ): Promise<boolean> {
    if (!(await pending.deferred)) return false;
    for (const message of messages) {
      const payload = { content: message.content ?? "", files: attachmentsOf(message) };
      if (pending.answered) {
        await pending.interaction.followUp(payload);
      } else {
        await pending.interaction.editReply(payload);
        pending.answered = true;
      }
    }
    return true;
  }

  private async sendToChannel(
    client: Client,
    chatId: string,
    messages: OutgoingMessage[],
    replyTo: string | undefined,
  ): Promise<void> {
    const channel = await client.channels.fetch(chatId);
    if (!channel?.isSendable()) throw new ChannelError(`Discord channel ${chatId} does not take messages`);
    for (const [i, message] of messages.entries()) {
      await channel.send({
        ...(message.content ? { content: message.content } : {}),
        files: attachmentsOf(message),
        ...(i === 0 && replyTo ? { reply: { messageReference: replyTo, failIfNotExists: false } } : {}),
      });
    }
  }

  private async sendTyping(chatId: string): Promise<void> {
    const channel = await this.client?.channels.fetch(chatId);
    if (channel?.isSendable()) await channel.sendTyping();
  }

  private async registerCommands(client: Client): Promise<void> {
    try {
      await client.application?.commands.set(SLASH_COMMANDS.map((c) => ({ ...c })));
      this.log.debug({ commands: SLASH_COMMANDS.length }, "slash commands registered");
    } catch (err) {
      // Typed commands still work; only the / menu is missing.
      this.log.warn({ err }, "could not register the slash commands with Discord");
    }
  }

  private track(task: Promise<void>): void {
    const tracked = task.catch((err: unknown) => this.log.error({ err }, "Discord event handling failed"));
    this.tasks.add(tracked);
    void tracked.finally(() => this.tasks.delete(tracked));
  }
}

/** login() resolves at the gateway READY; the client is usable at clientReady (guilds received). */
function connect(client: Client, token: string, signal: AbortSignal, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const finish = (err?: unknown) => {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
      client.off(Events.ClientReady, onReady);
      if (err === undefined) resolve();
      else reject(err instanceof Error ? err : new Error(errorMessage(err)));
    };
    const onReady = () => finish();
    const onAbort = () => finish(new ChannelError("start cancelled", { cause: signal.reason }));
    const timer = setTimeout(
      () => finish(new ChannelError(`Discord did not get ready within ${Math.round(timeoutMs / 1000)} s`)),
      timeoutMs,
    );
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    client.once(Events.ClientReady, onReady);
    client.login(token).catch(finish);
  });
}

function userView(user: User): DiscordUserView {
  return { id: user.id, username: user.username, displayName: user.globalName, bot: user.bot };
}

async function messageView(message: Message): Promise<DiscordMessageView> {
  const channel = message.channel;
  return {
    id: message.id,
    type: message.type,
    system: message.system,
    webhookId: message.webhookId ?? null,
    channelId: message.channelId,
    guildId: message.guildId ?? null,
    threadParentId: channel?.isThread() ? channel.parentId : null,
    author: userView(message.author),
    content: message.content,
    mentions: [...message.mentions.users.values()].map(userView),
    attachments: [...message.attachments.values()].map((a) => ({
      id: a.id,
      name: a.name,
      url: a.url,
      size: a.size,
      contentType: a.contentType,
    })),
    referenced: await referencedView(message),
  };
}

/** Discord sends the message replied to along with the reply; fetch it only when it did not. */
async function referencedView(message: Message): Promise<DiscordMessageView["referenced"]> {
  const id = message.reference?.messageId;
  if (!id) return null;
  let ref = message.channel?.messages.cache.get(id);
  if (!ref && message.reference?.channelId === message.channelId) {
    ref = await Promise.race([
      message.fetchReference().catch(() => undefined),
      new Promise<undefined>((resolve) =>
        setTimeout(() => resolve(undefined), REFERENCE_FETCH_TIMEOUT_MS).unref(),
      ),
    ]);
  }
  return ref ? { id: ref.id, author: userView(ref.author), content: ref.content } : null;
}

function interactionView(interaction: ChatInputCommandInteraction): DiscordInteractionView {
  const channel = interaction.channel;
  return {
    id: interaction.id,
    commandName: interaction.commandName,
    args: "",
    channelId: interaction.channelId,
    guildId: interaction.guildId ?? null,
    threadParentId: channel?.isThread() ? channel.parentId : null,
    user: userView(interaction.user),
  };
}

function refusalText(reason: string): string {
  return reason === "channel not in groupAllowFrom"
    ? "I don't answer in this channel. Ask me in a DM, or in a channel listed in channels.discord.groupAllowFrom."
    : "I can't do that here.";
}

function attachmentsOf(message: OutgoingMessage): { attachment: string; name: string }[] {
  return (message.files ?? []).map((f) => ({ attachment: f, name: basename(f) }));
}

async function existingFiles(paths: readonly string[]): Promise<{ files: string[]; missing: string[] }> {
  const files: string[] = [];
  const missing: string[] = [];
  for (const path of paths) {
    const st = await stat(path).catch(() => null);
    (st?.isFile() ? files : missing).push(path);
  }
  return { files, missing };
}

async function settle(tasks: Promise<unknown>[], timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.allSettled(tasks),
    new Promise((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    }),
  ]);
  clearTimeout(timer);
}
