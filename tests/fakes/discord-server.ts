/**
 * A loopback fake of Discord: the REST API (under /api/v10) and the gateway
 * WebSocket, speaking enough of the real protocol for discord.js (its REST and gateway clients)
 * to run unmodified against it (JSON encoding, no compression).
 *
 *   const fake = await FakeDiscord.start();
 *   const guild = fake.addGuild({ name: "home", channels: ["general"] });
 *   ... new Client({ intents, rest: { api: fake.apiUrl } }).login(fake.token) ...
 *   const alice = fake.addUser("alice");
 *   fake.userMessage({ channelId: fake.dmChannel(alice).id, author: alice, content: "hi" });
 *   await fake.waitFor(() => fake.sent.find((m) => m.channelId === dm.id));
 *   await fake.close();
 *
 * Gateway: HELLO (op 10) on connect; IDENTIFY (op 2) → READY then one
 * GUILD_CREATE per guild; heartbeats (op 1) are ACKed (op 11); RESUME (op 6)
 * replays the dispatches the client missed, then RESUMED; an unknown session
 * gets INVALID_SESSION (op 9). Every dispatch is numbered and kept, so
 * dispatches made while the client is disconnected are replayed on resume.
 * closeGateway(code) closes the socket (4000 makes the client resume).
 * A wrong token in IDENTIFY closes with 4004; privileged intents the app may
 * not use close with 4014.
 *
 * REST: GET /gateway/bot, /users/@me, /channels/:id, /channels/:id/messages/:id;
 * POST /channels/:id/messages (JSON or multipart with files; >2000 chars is a
 * 400 like Discord's; `components`: action rows of buttons, checked against
 * Discord's limits and kept on the message), /channels/:id/typing;
 * PATCH /channels/:id/messages/:id (content and components; an unknown
 * message is 404 code 10008, somebody else's 403 code 50005; the same text
 * again is a plain 200, as on Discord; MESSAGE_UPDATE follows; with `editMinIntervalMs`
 * set, an edit that comes sooner than that after the message's last change is a 429 whose
 * retry_after is the time left, like a per-message edit limit: streamed previews meet it);
 * PUT /applications/:id/commands;
 * POST /interactions/:id/:token/callback; PATCH /webhooks/:app/:token/messages/@original;
 * POST /webhooks/:app/:token (follow-ups). A wrong bot token is a 401.
 * rateLimitNext() makes the next matching requests 429s with retry_after and
 * X-RateLimit headers; failNext() makes them fail with a Discord JSON error
 * (403 code 50007 ...). Attachments are served at /attachments/:id/:name;
 * voiceMessage() sends a voice message (flag IS_VOICE_MESSAGE, audio/ogg).
 * An OpenAI-style POST /openai/v1/audio/transcriptions answers `transcript`.
 * Messages the bot sends are echoed back as MESSAGE_CREATE, as Discord does.
 * pressButton() is a person clicking a button under a message: INTERACTION_CREATE
 * type 3 (MESSAGE_COMPONENT); what the bot answers is in callbacksOf(id)
 * (type 4 with flags 64 is the ephemeral notice only the presser sees).
 *
 * Deadlines, as Discord keeps them: an interaction's callback later than `interactionCallbackMs`
 * (3 s) after the interaction was created is a 404 code 10062 "Unknown interaction"; a follow-up or
 * an edit of the original response later than `interactionTokenMs` (15 minutes) after it is a 401
 * code 50027 "Invalid Webhook Token". The interaction token's clock is the fake's `now()`, which
 * advanceClock(ms) moves on (the 15 minutes are not waited for); `callbackDelays` records how long
 * after its creation each callback came.
 *
 * Rate limits: after a 429 (rateLimitNext, editMinIntervalMs) the same route (method and path; every
 * route for a global one) answers 429 again to any request sent before retry_after has passed, and
 * counts it in `earlyRetries`, as Discord does (and bans a client that keeps doing it);
 * endRateLimits() lets every retry_after pass at once (the app was down meanwhile).
 * botMessages() and buttonsOf() show what the chat shows now (after edits); `shown` is every
 * text a bot message showed in a channel, in order (each post and each accepted edit);
 * botMessage() posts as the bot outside the adapter (an older version's
 * buttons); deleteMessage() deletes one (MESSAGE_DELETE).
 */
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { randomBytes } from "node:crypto";
import { WebSocketServer, WebSocket, type RawData } from "ws";
import { MIN_WAIT_MS } from "../helpers/wait.js";

export const INTENTS = {
  Guilds: 1,
  GuildMembers: 2,
  GuildPresences: 256,
  GuildMessages: 512,
  DirectMessages: 4096,
  MessageContent: 32768,
} as const;
const PRIVILEGED = INTENTS.GuildMembers | INTENTS.GuildPresences | INTENTS.MessageContent;

export interface FakeDiscordOptions {
  token?: string;
  heartbeatIntervalMs?: number;
  /** Privileged intents the application is allowed (default: all of them). */
  allowedPrivilegedIntents?: number;
  /** Echo the bot's own messages back over the gateway, as Discord does (default true). */
  echoOwnMessages?: boolean;
}

/** One text a bot message showed: when it was posted, or an edit Discord accepted. */
export interface ShownText {
  messageId: string;
  channelId: string;
  content: string;
  edit: boolean;
  at: number;
}

export interface FakeUser {
  id: string;
  username: string;
  global_name: string | null;
  discriminator: string;
  avatar: null;
  bot?: boolean;
  flags: number;
}

export interface FakeChannel {
  id: string;
  type: number;
  name?: string;
  guild_id?: string;
  parent_id?: string | null;
  recipients?: FakeUser[];
  [key: string]: unknown;
}

export interface FakeAttachment {
  id: string;
  filename: string;
  size: number;
  url: string;
  proxy_url: string;
  content_type: string;
  /** Voice messages only. */
  duration_secs?: number;
  waveform?: string;
}

export interface FakeMessage {
  id: string;
  channel_id: string;
  guild_id?: string;
  author: FakeUser;
  content: string;
  type: number;
  attachments: FakeAttachment[];
  mentions: FakeUser[];
  message_reference?: { type?: number; message_id: string; channel_id: string; guild_id?: string };
  referenced_message?: FakeMessage | null;
  /** Action rows of buttons, as the bot posted them. */
  components?: FakeActionRow[];
  [key: string]: unknown;
}

export interface FakeButton {
  type: 2;
  style: number;
  label?: string;
  custom_id?: string;
  url?: string;
  disabled?: boolean;
}

export interface FakeActionRow {
  type: 1;
  components: FakeButton[];
}

/** Message flag of a reply only its addressee sees (an ephemeral interaction response). */
export const EPHEMERAL = 1 << 6;

export interface RecordedRequest {
  method: string;
  /** Without the /api/v10 prefix, e.g. "/channels/1/messages". */
  path: string;
  query: Record<string, string>;
  headers: IncomingHttpHeaders;
  /** The JSON body (for multipart: payload_json). */
  body: unknown;
  files: { field: string; name: string; contentType: string; data: Buffer }[];
  status: number;
  at: number;
}

/** A message the bot sent, by any route. */
export interface SentMessage {
  via: "channel" | "interaction-original" | "followup";
  channelId: string;
  content: string;
  files: { name: string; data: Buffer }[];
  /** The message id it replies to (message_reference), if any. */
  replyTo?: string;
  interactionId?: string;
  message: FakeMessage;
  at: number;
}

export interface GatewayFrame {
  connection: number;
  op: number;
  d: unknown;
  at: number;
}

export interface GatewayConnection {
  n: number;
  path: string;
  query: Record<string, string>;
  ws: WebSocket;
  closeCode?: number;
}

interface Dispatch {
  op: 0;
  t: string;
  s: number;
  d: unknown;
}

interface Session {
  id: string;
  seq: number;
  log: Dispatch[];
  connection: GatewayConnection | null;
  intents: number;
}

interface FakeInteraction {
  id: string;
  token: string;
  channelId: string;
  guildId?: string;
  callbacks: unknown[];
  original?: FakeMessage;
  /** When it was created, by the fake's now(). */
  createdAt: number;
}

/** Flag of a message recorded with a Discord client's voice-message button. */
export const IS_VOICE_MESSAGE = 1 << 13;

interface FailureRule {
  method?: string;
  path: RegExp;
  remaining: number;
  status: number;
  code: number;
  message: string;
}

interface RateLimitRule {
  method?: string;
  path: RegExp;
  remaining: number;
  retryAfter: number;
  global: boolean;
}

const DISCORD_EPOCH = 1420070400000n;
const MAX_LOG = 5000;
/** A retry this close to the end of retry_after is in time: timers and Date.now() round to the ms. */
const CLOCK_GRAIN_MS = 2;

export class FakeDiscord {
  readonly token: string;
  readonly requests: RecordedRequest[] = [];
  readonly sent: SentMessage[] = [];
  readonly frames: GatewayFrame[] = [];
  readonly connections: GatewayConnection[] = [];
  readonly commands: { id: string; name: string; description: string }[] = [];
  /** How many times a client registered its slash commands (each does so once ready). */
  commandRegistrations = 0;
  /** Every text the bot's channel messages showed, in order: each post and each accepted edit. */
  readonly shown: ShownText[] = [];
  /**
   * Edits of one message sooner than this many ms after its last change (post or edit) get a 429
   * with the time left as retry_after. 0 (the default): no such limit.
   */
  editMinIntervalMs = 0;
  readonly bot: FakeUser;
  readonly applicationId: string;
  heartbeats = 0;
  /** An interaction callback later than this after the interaction was created: 404 code 10062. */
  interactionCallbackMs = 3000;
  /** Follow-ups and edits of the original response later than this after the interaction: 50027. */
  interactionTokenMs = 15 * 60_000;
  /** How long after its interaction was created each callback came (ms, the fake's clock). */
  readonly callbackDelays: number[] = [];
  /** Requests sent to a route before the retry_after of its last 429 had passed (each answered 429 again). */
  readonly earlyRetries: RecordedRequest[] = [];
  identifies = 0;
  resumes = 0;
  /** The close code to answer the next IDENTIFY with (e.g. 4004), then cleared. */
  failNextIdentify: number | null = null;
  /** What the transcription endpoint answers. */
  transcript = "hello from a voice note";
  readonly transcriptions: { fileName: string; size: number }[] = [];

  private readonly users = new Map<string, FakeUser>();
  private readonly guilds = new Map<
    string,
    { id: string; name: string; channels: string[]; threads: string[] }
  >();
  private readonly channels = new Map<string, FakeChannel>();
  private readonly messages = new Map<string, FakeMessage>();
  private readonly interactions = new Map<string, FakeInteraction>();
  private readonly files = new Map<string, { data: Buffer; contentType: string; delayMs: number }>();
  private readonly rateLimits: RateLimitRule[] = [];
  private readonly failures: FailureRule[] = [];
  /** When each message last changed (posted or edited), for editMinIntervalMs. */
  private readonly changedAt = new Map<string, number>();
  /** Route ("METHOD /path", or "global") → when its last 429's retry_after ends (Date.now() ms). */
  private readonly limitedUntil = new Map<string, number>();
  /** advanceClock's offset of the interaction clock from the real one. */
  private clockOffsetMs = 0;
  private readonly sockets = new Set<Socket>();
  private session: Session | null = null;
  private snowflake: bigint;
  private readonly wss = new WebSocketServer({ noServer: true });

  private constructor(
    private readonly server: Server,
    readonly baseUrl: string,
    private readonly opts: FakeDiscordOptions,
  ) {
    this.token = opts.token ?? "fake-bot-token";
    this.snowflake = (BigInt(Date.now()) - DISCORD_EPOCH) << 22n;
    this.applicationId = this.nextId();
    this.bot = this.addUser("palaver", { bot: true, id: this.applicationId });
    this.wss.on("connection", (ws: WebSocket, req: IncomingMessage) => this.onConnection(ws, req));
  }

  static async start(opts: FakeDiscordOptions = {}): Promise<FakeDiscord> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const fake = new FakeDiscord(server, `http://127.0.0.1:${port}`, opts);
    server.on("connection", (socket: Socket) => {
      fake.sockets.add(socket);
      socket.on("close", () => fake.sockets.delete(socket));
    });
    server.on("request", (req, res) => void fake.onRequest(req, res));
    server.on("upgrade", (req: IncomingMessage, socket: Socket, head: Buffer) => {
      const path = new URL(req.url ?? "/", fake.baseUrl).pathname;
      if (path !== "/gateway" && path !== "/resume") {
        socket.destroy();
        return;
      }
      fake.wss.handleUpgrade(req, socket, head, (ws) => fake.wss.emit("connection", ws, req));
    });
    return fake;
  }

  /** Base URL for an OpenAI client pointed at the fake transcription endpoint. */
  get transcriptionBaseURL(): string {
    return `${this.baseUrl}/openai/v1`;
  }

  /** What channels.discord.apiUrl is set to (the client appends /v10). */
  get apiUrl(): string {
    return `${this.baseUrl}/api`;
  }

  get gatewayUrl(): string {
    return `${this.baseUrl.replace(/^http/, "ws")}/gateway`;
  }

  /** The clock interaction deadlines are kept by: the real one, moved on by advanceClock. */
  now(): number {
    return Date.now() + this.clockOffsetMs;
  }

  /** Moves the interaction clock on by `ms` (15 minutes pass without being waited for). */
  advanceClock(ms: number): void {
    this.clockOffsetMs += ms;
  }

  /** Requests by method and a path pattern. */
  calls(method: string, path: RegExp | string): RecordedRequest[] {
    return this.requests.filter(
      (r) => r.method === method && (typeof path === "string" ? r.path === path : path.test(r.path)),
    );
  }

  /** Frames the client sent over the gateway with this opcode. */
  framesWithOp(op: number): GatewayFrame[] {
    return this.frames.filter((f) => f.op === op);
  }

  /** Polls until `check` returns something truthy; rejects after timeoutMs. */
  async waitFor<T>(
    check: () => T | undefined | null | false,
    timeoutMs = 5000,
    what = "condition",
  ): Promise<T> {
    // The limit only ends a hung test: never below MIN_WAIT_MS, for loaded machines.
    const deadline = Date.now() + Math.max(timeoutMs, MIN_WAIT_MS);
    for (;;) {
      const value = check();
      if (value) return value;
      if (Date.now() > deadline) throw new Error(`FakeDiscord: timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  // ---- world building -------------------------------------------------------

  nextId(): string {
    this.snowflake += 1n;
    return this.snowflake.toString();
  }

  addUser(username: string, opts: { bot?: boolean; id?: string; globalName?: string } = {}): FakeUser {
    const user: FakeUser = {
      id: opts.id ?? this.nextId(),
      username,
      global_name: opts.globalName ?? null,
      discriminator: "0",
      avatar: null,
      flags: 0,
      ...(opts.bot ? { bot: true } : {}),
    };
    this.users.set(user.id, user);
    return user;
  }

  /** A guild with text channels; dispatched as GUILD_CREATE at IDENTIFY, or now if a session is live. */
  addGuild(opts: { name: string; channels: string[] }): { id: string; channels: FakeChannel[] } {
    const id = this.nextId();
    const channels = opts.channels.map((name, position) => {
      const channel: FakeChannel = {
        id: this.nextId(),
        type: 0,
        name,
        guild_id: id,
        position,
        parent_id: null,
        permission_overwrites: [],
        nsfw: false,
        topic: null,
        last_message_id: null,
        rate_limit_per_user: 0,
        flags: 0,
      };
      this.channels.set(channel.id, channel);
      return channel;
    });
    this.guilds.set(id, { id, name: opts.name, channels: channels.map((c) => c.id), threads: [] });
    if (this.session) this.dispatch("GUILD_CREATE", this.guildPayload(id));
    return { id, channels };
  }

  /** The DM channel between a user and the bot. */
  dmChannel(user: FakeUser): FakeChannel {
    for (const channel of this.channels.values()) {
      if (channel.type === 1 && channel.recipients?.[0]?.id === user.id) return channel;
    }
    const channel: FakeChannel = {
      id: this.nextId(),
      type: 1,
      recipients: [user],
      last_message_id: null,
      flags: 0,
    };
    this.channels.set(channel.id, channel);
    return channel;
  }

  /** A public thread under a guild channel, announced with THREAD_CREATE. */
  createThread(opts: { parentId: string; name: string; owner: FakeUser }): FakeChannel {
    const parent = this.channels.get(opts.parentId);
    if (!parent?.guild_id) throw new Error(`no guild channel ${opts.parentId}`);
    const now = new Date().toISOString();
    const thread: FakeChannel = {
      id: this.nextId(),
      type: 11,
      name: opts.name,
      guild_id: parent.guild_id,
      parent_id: parent.id,
      owner_id: opts.owner.id,
      thread_metadata: {
        archived: false,
        auto_archive_duration: 1440,
        archive_timestamp: now,
        locked: false,
        create_timestamp: now,
      },
      member_count: 1,
      message_count: 0,
      total_message_sent: 0,
      rate_limit_per_user: 0,
      last_message_id: null,
      flags: 0,
    };
    this.channels.set(thread.id, thread);
    this.guilds.get(parent.guild_id)?.threads.push(thread.id);
    this.dispatch("THREAD_CREATE", { ...thread, newly_created: true });
    return thread;
  }

  /** A file served over HTTP, to put in a message's attachments. */
  addAttachment(
    filename: string,
    data: Buffer | string,
    contentType = "application/octet-stream",
    opts: { delayMs?: number } = {},
  ): FakeAttachment {
    const id = this.nextId();
    const bytes = typeof data === "string" ? Buffer.from(data) : data;
    const path = `/attachments/${id}/${encodeURIComponent(filename)}`;
    this.files.set(path, { data: bytes, contentType, delayMs: opts.delayMs ?? 0 });
    return {
      id,
      filename,
      size: bytes.length,
      url: `${this.baseUrl}${path}`,
      proxy_url: `${this.baseUrl}${path}`,
      content_type: contentType,
    };
  }

  /** A person (or another bot) writes: stored and dispatched as MESSAGE_CREATE. */
  userMessage(opts: {
    channelId: string;
    author: FakeUser;
    content: string;
    mentions?: FakeUser[];
    attachments?: FakeAttachment[];
    replyTo?: string;
    type?: number;
    flags?: number;
  }): FakeMessage {
    const channel = this.channels.get(opts.channelId);
    if (!channel) throw new Error(`no channel ${opts.channelId}`);
    const message = this.buildMessage(channel, opts.author, {
      content: opts.content,
      mentions: opts.mentions ?? [],
      attachments: opts.attachments ?? [],
      replyTo: opts.replyTo,
      type: opts.type,
      flags: opts.flags,
    });
    this.dispatch("MESSAGE_CREATE", this.messageEvent(message));
    return message;
  }

  /** A voice message as Discord clients record it: no text, one audio/ogg attachment, IS_VOICE_MESSAGE. */
  voiceMessage(opts: { channelId: string; author: FakeUser; content?: string; data?: Buffer }): FakeMessage {
    const audio = this.addAttachment(
      "voice-message.ogg",
      opts.data ?? Buffer.from("OggS fake opus"),
      "audio/ogg",
    );
    return this.userMessage({
      channelId: opts.channelId,
      author: opts.author,
      content: opts.content ?? "",
      attachments: [{ ...audio, duration_secs: 2.5, waveform: "AAAA" }],
      flags: IS_VOICE_MESSAGE,
    });
  }

  /** A user runs a slash command: dispatched as INTERACTION_CREATE. */
  slashCommand(opts: { name: string; user: FakeUser; channelId: string }): { id: string; token: string } {
    const command = this.commands.find((c) => c.name === opts.name);
    return this.interaction(opts.channelId, opts.user, {
      type: 2,
      data: { id: command?.id ?? this.nextId(), name: opts.name, type: 1 },
    });
  }

  /**
   * A person clicks the button labelled `label` under a message: INTERACTION_CREATE type 3
   * (MESSAGE_COMPONENT) carrying the button's custom_id and the message. Throws when the message
   * shows no such button (nobody can click what is not there).
   */
  pressButton(opts: { user: FakeUser; messageId: string; label: string }): { id: string; token: string } {
    const message = this.messages.get(opts.messageId);
    if (!message) throw new Error(`no message ${opts.messageId}`);
    const button = (message.components ?? [])
      .flatMap((row) => row.components)
      .find((b) => b.label === opts.label && b.custom_id !== undefined && !b.disabled);
    if (!button) throw new Error(`message ${opts.messageId} shows no button "${opts.label}"`);
    return this.interaction(message.channel_id, opts.user, {
      type: 3,
      data: { custom_id: button.custom_id, component_type: 2 },
      message: this.messageEvent(message),
    });
  }

  /** What the bot answered to an interaction (callback bodies: type 4 a message, 6 a silent acknowledgement ...). */
  callbacksOf(interactionId: string): unknown[] {
    return this.interactions.get(interactionId)?.callbacks ?? [];
  }

  /** A message as it is now (after edits). */
  message(id: string): FakeMessage | undefined {
    return this.messages.get(id);
  }

  /** The messages of the bot everybody sees (ephemeral replies left out), in the order they were posted. */
  botMessages(): FakeMessage[] {
    return [...this.messages.values()].filter(
      (m) => m.author.id === this.bot.id && (((m.flags as number | undefined) ?? 0) & EPHEMERAL) === 0,
    );
  }

  /** Someone deletes a message (a moderator, the user in a DM): gone, MESSAGE_DELETE dispatched. */
  deleteMessage(id: string): void {
    const message = this.messages.get(id);
    if (!message) throw new Error(`no message ${id}`);
    this.messages.delete(id);
    this.dispatch("MESSAGE_DELETE", {
      id,
      channel_id: message.channel_id,
      ...(message.guild_id ? { guild_id: message.guild_id } : {}),
    });
  }

  /** Labels of the buttons under a message, as it shows them now. */
  buttonsOf(messageId: string): string[] {
    const message = this.messages.get(messageId);
    return (message?.components ?? []).flatMap((row) => row.components.map((b) => b.label ?? ""));
  }

  /**
   * A message of the bot posted outside the adapter, e.g. by an older version of it, with whatever
   * components it had then. Stored and dispatched as MESSAGE_CREATE.
   */
  botMessage(opts: { channelId: string; content: string; components?: FakeActionRow[] }): FakeMessage {
    const channel = this.channels.get(opts.channelId);
    if (!channel) throw new Error(`no channel ${opts.channelId}`);
    const message = this.buildMessage(channel, this.bot, {
      content: opts.content,
      mentions: [],
      attachments: [],
    });
    if (opts.components) message.components = opts.components;
    this.dispatch("MESSAGE_CREATE", this.messageEvent(message));
    return message;
  }

  private interaction(
    channelId: string,
    user: FakeUser,
    body: Record<string, unknown>,
  ): { id: string; token: string } {
    const channel = this.channels.get(channelId);
    if (!channel) throw new Error(`no channel ${channelId}`);
    const id = this.nextId();
    const token = `itoken-${randomBytes(8).toString("hex")}`;
    this.interactions.set(id, {
      id,
      token,
      channelId: channel.id,
      ...(channel.guild_id ? { guildId: channel.guild_id } : {}),
      callbacks: [],
      createdAt: this.now(),
    });
    const inGuild = channel.guild_id !== undefined;
    this.dispatch("INTERACTION_CREATE", {
      id,
      application_id: this.applicationId,
      ...body,
      channel_id: channel.id,
      channel: this.channelPayload(channel),
      ...(inGuild
        ? {
            guild_id: channel.guild_id,
            member: { ...this.memberPayload(user), permissions: "1071698660929" },
          }
        : { user }),
      token,
      version: 1,
      app_permissions: "1071698660929",
      locale: "en-US",
      ...(inGuild ? { guild_locale: "en-US" } : {}),
      entitlements: [],
      authorizing_integration_owners: inGuild ? { "0": channel.guild_id } : { "1": user.id },
      context: inGuild ? 0 : 1,
    });
    return { id, token };
  }

  /** The Retry-After of every 429 so far has passed (time went by while the app was down, say). */
  endRateLimits(): void {
    this.limitedUntil.clear();
  }

  /** The next `count` requests matching get 429 with retry_after (seconds). */
  rateLimitNext(opts: {
    method?: string;
    path: RegExp;
    retryAfter?: number;
    count?: number;
    global?: boolean;
  }): void {
    this.rateLimits.push({
      method: opts.method,
      path: opts.path,
      remaining: opts.count ?? 1,
      retryAfter: opts.retryAfter ?? 0.2,
      global: opts.global ?? false,
    });
  }

  /** The next `count` requests matching fail with this Discord error (e.g. 403, code 50007). */
  failNext(opts: {
    method?: string;
    path: RegExp;
    status: number;
    code: number;
    message: string;
    count?: number;
  }): void {
    this.failures.push({ ...opts, remaining: opts.count ?? 1 });
  }

  // ---- gateway ---------------------------------------------------------------

  /** Sends a dispatch on the live session, or keeps it for replay when the client is away. */
  dispatch(t: string, d: unknown): void {
    const session = this.session;
    if (!session) return;
    session.seq += 1;
    const payload: Dispatch = { op: 0, t, s: session.seq, d };
    session.log.push(payload);
    if (session.log.length > MAX_LOG) session.log.shift();
    const ws = session.connection?.ws;
    if (ws?.readyState === WebSocket.OPEN) ws.send(JSON.stringify(payload));
  }

  /** Closes the client's gateway socket from the server side (4000: the client resumes). */
  closeGateway(code: number, reason = "closed by the fake"): void {
    const connection = this.session?.connection;
    if (!connection) throw new Error("no live gateway connection");
    if (this.session) this.session.connection = null;
    connection.ws.close(code, reason);
  }

  get liveConnection(): GatewayConnection | null {
    return this.session?.connection ?? null;
  }

  private onConnection(ws: WebSocket, req: IncomingMessage): void {
    const url = new URL(req.url ?? "/", this.baseUrl);
    const connection: GatewayConnection = {
      n: this.connections.length + 1,
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      ws,
    };
    this.connections.push(connection);
    ws.on("message", (data: RawData) => this.onFrame(connection, data));
    ws.on("close", (code: number) => {
      connection.closeCode = code;
      if (this.session?.connection === connection) {
        this.session.connection = null;
        // A client that closes with 1000/1001 ends its session, as on Discord.
        if (code === 1000 || code === 1001) this.session = null;
      }
    });
    ws.send(JSON.stringify({ op: 10, d: { heartbeat_interval: this.opts.heartbeatIntervalMs ?? 41_250 } }));
  }

  private onFrame(connection: GatewayConnection, data: RawData): void {
    let frame: { op?: unknown; d?: unknown };
    try {
      frame = JSON.parse(rawToString(data)) as { op?: unknown; d?: unknown };
    } catch {
      connection.ws.close(4002, "Error while decoding payload.");
      return;
    }
    const op = typeof frame.op === "number" ? frame.op : -1;
    this.frames.push({ connection: connection.n, op, d: frame.d, at: Date.now() });
    switch (op) {
      case 1:
        this.heartbeats++;
        connection.ws.send(JSON.stringify({ op: 11 }));
        return;
      case 2:
        this.identify(connection, frame.d as { token?: string; intents?: number });
        return;
      case 6:
        this.resume(connection, frame.d as { token?: string; session_id?: string; seq?: number });
        return;
      default:
        return; // presence updates, member requests ... are not needed here
    }
  }

  private identify(connection: GatewayConnection, d: { token?: string; intents?: number }): void {
    this.identifies++;
    if (this.failNextIdentify !== null) {
      const code = this.failNextIdentify;
      this.failNextIdentify = null;
      connection.ws.close(code, "failing as told");
      return;
    }
    if (d.token !== this.token) {
      connection.ws.close(4004, "Authentication failed.");
      return;
    }
    const intents = d.intents ?? 0;
    const allowed = this.opts.allowedPrivilegedIntents ?? PRIVILEGED;
    if (intents & PRIVILEGED & ~allowed) {
      connection.ws.close(4014, "Disallowed intent(s).");
      return;
    }
    this.session = { id: randomBytes(16).toString("hex"), seq: 0, log: [], connection, intents };
    this.dispatch("READY", {
      v: 10,
      user: { ...this.bot, verified: true, mfa_enabled: false },
      guilds: [...this.guilds.keys()].map((id) => ({ id, unavailable: true })),
      session_id: this.session.id,
      resume_gateway_url: `${this.baseUrl.replace(/^http/, "ws")}/resume`,
      session_type: "normal",
      shard: [0, 1],
      application: { id: this.applicationId, flags: 0 },
      private_channels: [],
      presences: [],
      relationships: [],
      guild_join_requests: [],
      geo_ordered_rtc_regions: [],
      user_settings: {},
    });
    for (const id of this.guilds.keys()) this.dispatch("GUILD_CREATE", this.guildPayload(id));
  }

  private resume(
    connection: GatewayConnection,
    d: { token?: string; session_id?: string; seq?: number },
  ): void {
    this.resumes++;
    const session = this.session;
    if (!session || d.session_id !== session.id || d.token !== this.token) {
      connection.ws.send(JSON.stringify({ op: 9, d: false }));
      return;
    }
    session.connection = connection;
    const from = d.seq ?? 0;
    for (const payload of session.log) if (payload.s > from) connection.ws.send(JSON.stringify(payload));
    this.dispatch("RESUMED", null);
  }

  // ---- REST --------------------------------------------------------------------

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req);
    const url = new URL(req.url ?? "/", this.baseUrl);
    const method = req.method ?? "GET";
    const headers = req.headers;
    const record: RecordedRequest = {
      method,
      // A client may escape "@original" as %40original (discord.js did); Discord takes both.
      path: decodeURIComponent(url.pathname).replace(/^\/api(\/v\d+)?/, ""),
      query: Object.fromEntries(url.searchParams),
      headers,
      body: undefined,
      files: [],
      status: 0,
      at: Date.now(),
    };
    try {
      await parseBody(record, raw, headers["content-type"]);
    } catch {
      return this.reply(res, record, 400, { message: "400: Bad Request", code: 0 });
    }
    this.requests.push(record);

    if (method === "GET" && url.pathname.startsWith("/attachments/")) {
      const file = this.files.get(url.pathname);
      if (!file) return this.reply(res, record, 404, { message: "404: Not Found", code: 0 });
      if (file.delayMs) await new Promise((resolve) => setTimeout(resolve, file.delayMs));
      record.status = 200;
      res.writeHead(200, { "content-type": file.contentType, "content-length": file.data.length });
      res.end(file.data);
      return;
    }
    if (method === "POST" && url.pathname === "/openai/v1/audio/transcriptions") {
      const file = record.files.find((f) => f.field === "file");
      if (!file) return this.reply(res, record, 400, { error: { message: "file is required" } });
      this.transcriptions.push({ fileName: file.name, size: file.data.length });
      return this.reply(res, record, 200, { text: this.transcript });
    }
    if (!url.pathname.startsWith("/api/"))
      return this.reply(res, record, 404, { message: "404: Not Found", code: 0 });

    const path = record.path;
    const tokenless = path.startsWith("/interactions/") || path.startsWith("/webhooks/");
    if (!tokenless && headers.authorization !== `Bot ${this.token}`) {
      return this.reply(res, record, 401, { message: "401: Unauthorized", code: 0 });
    }
    const early = this.earlyRetryWait(method, path);
    if (early > 0) {
      this.earlyRetries.push(record);
      return this.rateLimited(res, record, early, false);
    }
    const limited = this.rateLimitFor(method, path);
    if (limited) return this.rateLimited(res, record, limited.retryAfter, limited.global);
    const failure = this.failureFor(method, path);
    if (failure)
      return this.reply(res, record, failure.status, { message: failure.message, code: failure.code });
    this.route(method, path, record, res);
  }

  private route(method: string, path: string, record: RecordedRequest, res: ServerResponse): void {
    const body = (record.body ?? {}) as Record<string, unknown>;
    let m: RegExpExecArray | null;
    if (method === "GET" && path === "/gateway/bot") {
      return this.reply(res, record, 200, {
        url: this.gatewayUrl,
        shards: 1,
        session_start_limit: { total: 1000, remaining: 999, reset_after: 0, max_concurrency: 1 },
      });
    }
    if (method === "GET" && path === "/gateway")
      return this.reply(res, record, 200, { url: this.gatewayUrl });
    if (method === "GET" && path === "/users/@me") return this.reply(res, record, 200, this.bot);
    if ((m = /^\/channels\/(\d+)$/.exec(path)) && method === "GET") {
      const channel = this.channels.get(m[1]!);
      return channel
        ? this.reply(res, record, 200, this.channelPayload(channel))
        : this.reply(res, record, 404, { message: "Unknown Channel", code: 10003 });
    }
    if ((m = /^\/channels\/(\d+)\/messages\/(\d+)$/.exec(path)) && method === "GET") {
      const message = this.messages.get(m[2]!);
      return message && message.channel_id === m[1]
        ? this.reply(res, record, 200, message)
        : this.reply(res, record, 404, { message: "Unknown Message", code: 10008 });
    }
    if ((m = /^\/channels\/(\d+)\/messages\/(\d+)$/.exec(path)) && method === "PATCH") {
      const message = this.messages.get(m[2]!);
      if (!message || message.channel_id !== m[1])
        return this.reply(res, record, 404, { message: "Unknown Message", code: 10008 });
      if (message.author.id !== this.bot.id)
        return this.reply(res, record, 403, {
          message: "Cannot edit a message authored by another user",
          code: 50005,
        });
      const content = typeof body.content === "string" ? body.content : message.content;
      const components = Array.isArray(body.components)
        ? (body.components as FakeActionRow[])
        : (message.components ?? []);
      // An edit may not leave the message empty (no text, no files, no components).
      const invalid =
        invalidMessageBody({ content }, message.attachments.length + components.length) ??
        invalidComponents(body.components);
      if (invalid) return this.reply(res, record, 400, invalid);
      const wait = this.editWait(message.id);
      if (wait > 0) return this.rateLimited(res, record, wait, false);
      message.content = content;
      message.components = components;
      message.edited_timestamp = new Date().toISOString();
      this.changed(message, true);
      this.dispatch("MESSAGE_UPDATE", this.messageEvent(message));
      return this.reply(res, record, 200, message);
    }
    if ((m = /^\/channels\/(\d+)\/typing$/.exec(path)) && method === "POST") {
      if (!this.channels.has(m[1]!))
        return this.reply(res, record, 404, { message: "Unknown Channel", code: 10003 });
      return this.reply(res, record, 204);
    }
    if ((m = /^\/channels\/(\d+)\/messages$/.exec(path)) && method === "POST") {
      const channel = this.channels.get(m[1]!);
      if (!channel) return this.reply(res, record, 404, { message: "Unknown Channel", code: 10003 });
      const invalid = invalidMessageBody(body, record.files.length) ?? invalidComponents(body.components);
      if (invalid) return this.reply(res, record, 400, invalid);
      const reference = body.message_reference as { message_id?: string } | undefined;
      const message = this.buildMessage(channel, this.bot, {
        content: typeof body.content === "string" ? body.content : "",
        mentions: [],
        attachments: this.storeUploads(record),
        replyTo: reference?.message_id,
      });
      const components = body.components as FakeActionRow[] | undefined;
      if (components?.length) message.components = components;
      this.recordSent("channel", message, record);
      this.changed(message, false);
      if (this.opts.echoOwnMessages !== false) this.dispatch("MESSAGE_CREATE", this.messageEvent(message));
      return this.reply(res, record, 200, message, {
        "x-ratelimit-limit": "5",
        "x-ratelimit-remaining": "4",
      });
    }
    if ((m = /^\/applications\/(\d+)\/commands$/.exec(path)) && method === "PUT") {
      this.commandRegistrations++;
      const list = Array.isArray(record.body) ? (record.body as { name: string; description: string }[]) : [];
      this.commands.length = 0;
      for (const c of list)
        this.commands.push({ id: this.nextId(), name: c.name, description: c.description });
      return this.reply(
        res,
        record,
        200,
        this.commands.map((c) => ({
          ...c,
          application_id: m![1],
          type: 1,
          version: this.nextId(),
          default_member_permissions: null,
          options: [],
        })),
      );
    }
    if ((m = /^\/interactions\/(\d+)\/([^/]+)\/callback$/.exec(path)) && method === "POST") {
      const interaction = this.interactions.get(m[1]!);
      if (!interaction || interaction.token !== m[2])
        return this.reply(res, record, 404, { message: "Unknown interaction", code: 10062 });
      const delay = this.now() - interaction.createdAt;
      this.callbackDelays.push(delay);
      // Too late: Discord has shown the user "This interaction failed" and forgotten it.
      if (delay > this.interactionCallbackMs)
        return this.reply(res, record, 404, { message: "Unknown interaction", code: 10062 });
      if (interaction.callbacks.length > 0)
        return this.reply(res, record, 400, {
          message: "Interaction has already been acknowledged.",
          code: 40060,
        });
      interaction.callbacks.push(body);
      const data = body.data as Record<string, unknown> | undefined;
      if (body.type === 4) {
        const channel = this.channels.get(interaction.channelId)!;
        interaction.original = this.buildMessage(channel, this.bot, {
          content: typeof data?.content === "string" ? data.content : "",
          mentions: [],
          attachments: [],
          flags: typeof data?.flags === "number" ? data.flags : 0,
        });
        this.recordSent("interaction-original", interaction.original, record, interaction.id);
      }
      return this.reply(res, record, 204);
    }
    if ((m = /^\/webhooks\/(\d+)\/([^/]+)\/messages\/@original$/.exec(path)) && method === "PATCH") {
      const interaction = this.interactionByToken(m[2]!);
      if (!interaction || interaction.callbacks.length === 0)
        return this.reply(res, record, 404, { message: "Unknown Webhook", code: 10015 });
      if (this.tokenExpired(interaction))
        return this.reply(res, record, 401, { message: "Invalid Webhook Token", code: 50027 });
      const invalid = invalidMessageBody(body, record.files.length);
      if (invalid) return this.reply(res, record, 400, invalid);
      const channel = this.channels.get(interaction.channelId)!;
      interaction.original = this.buildMessage(channel, this.bot, {
        content: typeof body.content === "string" ? body.content : "",
        mentions: [],
        attachments: this.storeUploads(record),
        id: interaction.original?.id,
      });
      this.recordSent("interaction-original", interaction.original, record, interaction.id);
      return this.reply(res, record, 200, { ...interaction.original, webhook_id: this.applicationId });
    }
    if ((m = /^\/webhooks\/(\d+)\/([^/]+)$/.exec(path)) && method === "POST") {
      const interaction = this.interactionByToken(m[2]!);
      if (!interaction || interaction.callbacks.length === 0)
        return this.reply(res, record, 404, { message: "Unknown Webhook", code: 10015 });
      if (this.tokenExpired(interaction))
        return this.reply(res, record, 401, { message: "Invalid Webhook Token", code: 50027 });
      const invalid = invalidMessageBody(body, record.files.length);
      if (invalid) return this.reply(res, record, 400, invalid);
      const channel = this.channels.get(interaction.channelId)!;
      const message = this.buildMessage(channel, this.bot, {
        content: typeof body.content === "string" ? body.content : "",
        mentions: [],
        attachments: this.storeUploads(record),
      });
      this.recordSent("followup", message, record, interaction.id);
      return this.reply(res, record, 200, { ...message, webhook_id: this.applicationId });
    }
    return this.reply(res, record, 404, { message: "404: Not Found", code: 0 });
  }

  /** A 429 as Discord sends it: retry_after (seconds) in the body, the same in the headers. */
  private rateLimited(
    res: ServerResponse,
    record: RecordedRequest,
    retryAfter: number,
    global: boolean,
  ): void {
    record.status = 429;
    const until = Date.now() + retryAfter * 1000;
    const route = global ? "global" : `${record.method} ${record.path}`;
    this.limitedUntil.set(route, Math.max(until, this.limitedUntil.get(route) ?? 0));
    const body = JSON.stringify({ message: "You are being rate limited.", retry_after: retryAfter, global });
    res.writeHead(429, {
      "content-type": "application/json",
      // Discord sends whole seconds here; the fake sends the fraction so tests stay fast.
      "retry-after": String(retryAfter),
      "x-ratelimit-limit": "5",
      "x-ratelimit-remaining": "0",
      "x-ratelimit-reset-after": String(retryAfter),
      "x-ratelimit-bucket": "fake-bucket",
      "x-ratelimit-scope": global ? "global" : "user",
      ...(global ? { "x-ratelimit-global": "true" } : {}),
    });
    res.end(body);
  }

  /** Seconds an edit of `messageId` must still wait under editMinIntervalMs; 0 when it may go. */
  private editWait(messageId: string): number {
    const last = this.changedAt.get(messageId);
    if (!this.editMinIntervalMs || last === undefined) return 0;
    const leftMs = last + this.editMinIntervalMs - Date.now();
    return leftMs > 0 ? Math.ceil(leftMs) / 1000 : 0;
  }

  /** A bot message in a channel now shows `message.content`. */
  private changed(message: FakeMessage, edit: boolean): void {
    const at = Date.now();
    this.changedAt.set(message.id, at);
    this.shown.push({
      messageId: message.id,
      channelId: message.channel_id,
      content: message.content,
      edit,
      at,
    });
  }

  /** Seconds still left of the last 429's retry_after on this route (or a global one); 0 when none. */
  private earlyRetryWait(method: string, path: string): number {
    const until = Math.max(
      this.limitedUntil.get(`${method} ${path}`) ?? 0,
      this.limitedUntil.get("global") ?? 0,
    );
    const leftMs = until - Date.now() - CLOCK_GRAIN_MS;
    return leftMs > 0 ? Math.ceil(leftMs) / 1000 : 0;
  }

  /** An interaction token lives 15 minutes (interactionTokenMs) after its interaction. */
  private tokenExpired(interaction: FakeInteraction): boolean {
    return this.now() - interaction.createdAt > this.interactionTokenMs;
  }

  private rateLimitFor(method: string, path: string): RateLimitRule | null {
    const rule = this.rateLimits.find(
      (r) => r.remaining > 0 && (!r.method || r.method === method) && r.path.test(path),
    );
    if (!rule) return null;
    rule.remaining--;
    return rule;
  }

  private failureFor(method: string, path: string): FailureRule | null {
    const rule = this.failures.find(
      (r) => r.remaining > 0 && (!r.method || r.method === method) && r.path.test(path),
    );
    if (!rule) return null;
    rule.remaining--;
    return rule;
  }

  private interactionByToken(token: string): FakeInteraction | undefined {
    for (const interaction of this.interactions.values()) if (interaction.token === token) return interaction;
    return undefined;
  }

  private storeUploads(record: RecordedRequest): FakeAttachment[] {
    return record.files.map((f) => this.addAttachment(f.name, f.data, f.contentType));
  }

  private recordSent(
    via: SentMessage["via"],
    message: FakeMessage,
    record: RecordedRequest,
    interactionId?: string,
  ) {
    this.sent.push({
      via,
      channelId: message.channel_id,
      content: message.content,
      files: record.files.map((f) => ({ name: f.name, data: f.data })),
      ...(message.message_reference ? { replyTo: message.message_reference.message_id } : {}),
      ...(interactionId ? { interactionId } : {}),
      message,
      at: Date.now(),
    });
  }

  private reply(
    res: ServerResponse,
    record: RecordedRequest,
    status: number,
    body?: unknown,
    headers: Record<string, string> = {},
  ): void {
    record.status = status;
    if (body === undefined) {
      res.writeHead(status, headers);
      res.end();
      return;
    }
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  }

  // ---- payloads ------------------------------------------------------------------

  private buildMessage(
    channel: FakeChannel,
    author: FakeUser,
    opts: {
      content: string;
      mentions: FakeUser[];
      attachments: FakeAttachment[];
      replyTo?: string;
      type?: number;
      id?: string;
      flags?: number;
    },
  ): FakeMessage {
    const message: FakeMessage = {
      id: opts.id ?? this.nextId(),
      channel_id: channel.id,
      ...(channel.guild_id ? { guild_id: channel.guild_id } : {}),
      author,
      content: opts.content,
      timestamp: new Date().toISOString(),
      edited_timestamp: null,
      tts: false,
      mention_everyone: false,
      mentions: opts.mentions,
      mention_roles: [],
      attachments: opts.attachments,
      embeds: [],
      pinned: false,
      type: opts.type ?? (opts.replyTo ? 19 : 0),
      flags: opts.flags ?? 0,
      ...(opts.replyTo
        ? {
            message_reference: {
              type: 0,
              message_id: opts.replyTo,
              channel_id: channel.id,
              ...(channel.guild_id ? { guild_id: channel.guild_id } : {}),
            },
            referenced_message: this.messages.get(opts.replyTo) ?? null,
          }
        : {}),
    };
    this.messages.set(message.id, message);
    channel.last_message_id = message.id;
    return message;
  }

  private messageEvent(message: FakeMessage): Record<string, unknown> {
    const channel = this.channels.get(message.channel_id);
    const inGuild = message.guild_id !== undefined;
    return {
      ...message,
      channel_type: channel?.type ?? 0,
      ...(inGuild
        ? {
            member: this.memberPayload(message.author, false),
            mentions: message.mentions.map((u) => ({ ...u, member: this.memberPayload(u, false) })),
          }
        : {}),
    };
  }

  private memberPayload(user: FakeUser, withUser = true): Record<string, unknown> {
    return {
      ...(withUser ? { user } : {}),
      nick: null,
      avatar: null,
      roles: [],
      joined_at: new Date(0).toISOString(),
      deaf: false,
      mute: false,
      flags: 0,
      pending: false,
    };
  }

  private channelPayload(channel: FakeChannel): FakeChannel {
    return { ...channel };
  }

  private guildPayload(id: string): Record<string, unknown> {
    const guild = this.guilds.get(id)!;
    return {
      id,
      name: guild.name,
      icon: null,
      splash: null,
      discovery_splash: null,
      owner_id: this.bot.id,
      afk_channel_id: null,
      afk_timeout: 300,
      verification_level: 0,
      default_message_notifications: 0,
      explicit_content_filter: 0,
      roles: [
        {
          id,
          name: "@everyone",
          color: 0,
          hoist: false,
          icon: null,
          unicode_emoji: null,
          position: 0,
          permissions: "1071698660929",
          managed: false,
          mentionable: false,
          flags: 0,
        },
      ],
      emojis: [],
      stickers: [],
      features: [],
      mfa_level: 0,
      application_id: null,
      system_channel_id: null,
      system_channel_flags: 0,
      rules_channel_id: null,
      max_members: 500000,
      vanity_url_code: null,
      description: null,
      banner: null,
      premium_tier: 0,
      premium_subscription_count: 0,
      preferred_locale: "en-US",
      public_updates_channel_id: null,
      nsfw_level: 0,
      premium_progress_bar_enabled: false,
      safety_alerts_channel_id: null,
      joined_at: new Date(0).toISOString(),
      large: false,
      unavailable: false,
      member_count: 2,
      voice_states: [],
      members: [this.memberPayload(this.bot)],
      channels: guild.channels.map((c) => this.channelPayload(this.channels.get(c)!)),
      threads: guild.threads.map((c) => this.channelPayload(this.channels.get(c)!)),
      presences: [],
      stage_instances: [],
      guild_scheduled_events: [],
      soundboard_sounds: [],
    };
  }

  async close(): Promise<void> {
    this.session = null;
    for (const client of this.wss.clients) client.terminate();
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Discord's checks on a message body: not empty, content at most 2000 characters. */
function invalidMessageBody(body: Record<string, unknown>, files: number): Record<string, unknown> | null {
  const content = typeof body.content === "string" ? body.content : "";
  if (content.length > 2000) {
    return {
      message: "Invalid Form Body",
      code: 50035,
      errors: {
        content: {
          _errors: [{ code: "BASE_TYPE_MAX_LENGTH", message: "Must be 2000 or fewer in length." }],
        },
      },
    };
  }
  if (content.trim() === "" && files === 0) return { message: "Cannot send an empty message", code: 50006 };
  return null;
}

/** Discord's checks on message components: at most 5 action rows of 1 to 5 buttons, labels ≤ 80, custom_ids ≤ 100 and unique. */
function invalidComponents(components: unknown): Record<string, unknown> | null {
  if (components === undefined) return null;
  const invalid = (why: string) => ({
    message: "Invalid Form Body",
    code: 50035,
    errors: { components: { _errors: [{ code: "COMPONENT_INVALID", message: why }] } },
  });
  if (!Array.isArray(components) || components.length > 5) return invalid("at most 5 action rows");
  const ids = new Set<string>();
  for (const row of components as { type?: unknown; components?: unknown }[]) {
    if (row.type !== 1 || !Array.isArray(row.components))
      return invalid("top-level components must be action rows");
    if (row.components.length < 1 || row.components.length > 5)
      return invalid("1 to 5 buttons per action row");
    for (const button of row.components as Partial<FakeButton>[]) {
      if (button.type !== 2) return invalid("only buttons are supported by this fake");
      if (typeof button.label !== "string" || button.label.length > 80)
        return invalid("label: at most 80 characters");
      const id = button.custom_id;
      if (typeof id !== "string" || id.length < 1 || id.length > 100)
        return invalid("custom_id: 1 to 100 characters");
      if (ids.has(id)) return invalid("custom_id must be unique");
      ids.add(id);
      if (![1, 2, 3, 4].includes(button.style ?? 0)) return invalid("style: 1 to 4 with a custom_id");
    }
  }
  return null;
}

function rawToString(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString("utf8");
  if (Array.isArray(data)) return Buffer.concat(data).toString("utf8");
  return Buffer.from(data).toString("utf8");
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

/** JSON bodies as they are; multipart (messages with files) through the Fetch API's form-data parser. */
async function parseBody(
  record: RecordedRequest,
  raw: Buffer,
  contentType: string | undefined,
): Promise<void> {
  if (raw.length === 0) return;
  if (contentType?.startsWith("multipart/form-data")) {
    const form = await new Response(raw, { headers: { "content-type": contentType } }).formData();
    for (const [field, value] of form.entries()) {
      if (typeof value === "string") {
        if (field === "payload_json") record.body = JSON.parse(value) as unknown;
        continue;
      }
      record.files.push({
        field,
        name: value.name,
        contentType: value.type || "application/octet-stream",
        data: Buffer.from(await value.arrayBuffer()),
      });
    }
    return;
  }
  record.body = JSON.parse(raw.toString("utf8")) as unknown;
}
