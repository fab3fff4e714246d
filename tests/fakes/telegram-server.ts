/**
 * A loopback fake of the Telegram Bot API, for driving the real grammy in tests.
 *
 *   const tg = await FakeTelegram.start();
 *   ... new Bot(tg.token, { client: { apiRoot: tg.apiRoot } }) ...
 *   tg.userMessage({ text: "hi" });                 // an update for the next getUpdates
 *   await tg.waitForCall("sendMessage");
 *   tg.sent[0].text; tg.calls; tg.failNext("sendMessage", { code: 429, description: "...", retryAfter: 1 });
 *   tg.dropNext("getUpdates"); tg.hangGetUpdates = true;   // network trouble
 *   await tg.close();
 *
 * Speaks enough of the real protocol for grammy to work unmodified:
 * POST /bot<token>/<method> with JSON or multipart bodies, answers
 * `{ ok, result }` or `{ ok: false, error_code, description, parameters }`
 * with the HTTP status Telegram uses. getUpdates long-polls with offset
 * semantics (updates below the offset are confirmed and forgotten; a newer
 * getUpdates ends an older one with 409, as Telegram does). sendMessage
 * checks HTML the way Telegram does (allowed tags, nesting, entities, 4096
 * characters after parsing) and answers 400 "can't parse entities".
 * Inline keyboards are kept per message; editMessageText rewrites a message
 * in place with Telegram's errors ("message is not modified", "message to
 * edit not found", "message can't be edited"); pressButton delivers a
 * callback_query update and answerCallbackQuery records what the presser
 * was shown (each query answered at most once, text at most 200 characters).
 * sendMessageDraft (Bot API 9.3) records a private chat's draft (`drafts`;
 * 400 TEXTDRAFT_PEER_INVALID elsewhere, 404 with `draftsSupported` off);
 * `shown` lists every text the chats showed (posts, edits, drafts). With
 * `minEditIntervalMs` set, an edit or draft update of one message or draft
 * sooner than that after its last change gets Telegram's 429 with
 * retry_after (counted in `rateLimited`).
 * allowed_updates (of getUpdates or setWebhook) is kept as Telegram keeps it
 * (`allowedUpdates`; unset or [] means every kind but chat_member and the
 * reactions) and updates of other kinds are discarded, never delivered;
 * userBlocksBot delivers the my_chat_member update of a user blocking the bot.
 * Rate limits are kept as Telegram keeps them: after any 429 with retry_after, a request to the same
 * place (sends to that chat, edits of that message, that method otherwise) sent before retry_after
 * has passed is answered 429 again and recorded in `earlyRetries`. With `sendLimits` set, sends to
 * one chat are limited per window as Telegram documents (TELEGRAM_SEND_LIMITS: about one message a
 * second in a private chat, 20 a minute in a group; tests scale the windows down).
 * GET /file/bot<token>/<path> serves files registered with addFile; an
 * OpenAI-style POST /openai/v1/audio/transcriptions answers `transcript`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { MIN_WAIT_MS } from "../helpers/wait.js";

export interface FakeUser {
  id: number;
  is_bot: boolean;
  first_name: string;
  last_name?: string;
  username?: string;
}

export interface FakeFile {
  name: string;
  type: string;
  size: number;
  data: Buffer;
}

export interface RecordedCall {
  method: string;
  /** JSON body, or the multipart fields (JSON-looking fields parsed). */
  params: Record<string, unknown>;
  /** Uploaded files by field name ("photo", "document" ...), resolved from attach:// references. */
  files: Record<string, FakeFile>;
  at: number;
}

/** One inline keyboard button as the bot sent it. */
export interface FakeButton {
  text: string;
  callback_data?: string;
  url?: string;
  style?: string;
}

/** A message the bot sent (sendMessage and the send<Media> methods); editMessageText changes it in place. */
export interface SentMessage {
  method: string;
  messageId: number;
  chatId: number | string;
  text?: string;
  caption?: string;
  parseMode?: string;
  threadId?: number;
  replyTo?: number;
  silent: boolean;
  file?: FakeFile;
  /** The inline keyboard under it now (empty rows: none). */
  buttons: FakeButton[][];
  /** How many times editMessageText changed it. */
  edits: number;
  at: number;
}

/** A draft the bot showed in a private chat (sendMessageDraft); each update is one entry. */
export interface FakeDraft {
  chatId: number;
  draftId: number;
  text: string;
  parseMode?: string;
  threadId?: number;
  at: number;
}

/** What answerCallbackQuery showed the presser. */
export interface CallbackAnswer {
  queryId: string;
  text?: string;
  showAlert: boolean;
}

export interface ScriptedError {
  code: number;
  description: string;
  retryAfter?: number;
  migrateTo?: number;
}

type Json = Record<string, unknown>;

/** How many messages one chat takes per window before Telegram answers 429. */
export interface SendLimits {
  privateChat: { count: number; windowMs: number };
  group: { count: number; windowMs: number };
}

/** Telegram's documented limits (https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this). */
export const TELEGRAM_SEND_LIMITS: SendLimits = {
  privateChat: { count: 1, windowMs: 1000 },
  group: { count: 20, windowMs: 60_000 },
};

/** Methods that post a message to a chat: what the per-chat send limit counts. */
const SEND_METHODS = new Set([
  "sendMessage",
  "sendPhoto",
  "sendDocument",
  "sendVoice",
  "sendAudio",
  "sendVideo",
  "sendAnimation",
  "sendMediaGroup",
  "sendSticker",
  "copyMessage",
  "forwardMessage",
]);

/** A retry this close to the end of retry_after is in time: timers and Date.now() round to the ms. */
const CLOCK_GRAIN_MS = 2;

interface Poller {
  offset: number;
  limit: number;
  timer: NodeJS.Timeout;
  res: ServerResponse;
  done: boolean;
}

/** Update kinds Telegram delivers only when allowed_updates names them. */
const NOT_BY_DEFAULT = new Set(["chat_member", "message_reaction", "message_reaction_count"]);

const BOT_DEFAULT: FakeUser = {
  id: 777000111,
  is_bot: true,
  first_name: "Palaver",
  username: "palaver_test_bot",
};
export const TOKEN_DEFAULT = "123456789:AAFakeTokenForTestsOnly_abcdefghijklmn";

export class FakeTelegram {
  readonly calls: RecordedCall[] = [];
  readonly sent: SentMessage[] = [];
  readonly transcriptions: { model: string; fileName: string; size: number }[] = [];
  /** What the transcription endpoint answers. */
  transcript = "hello from a voice note";
  /** How many files GET /file/bot… has served. */
  fileDownloads = 0;
  /** The highest update_id a getUpdates answer has carried to the bot. */
  deliveredUpdateId = 0;
  /** Accept getUpdates and never answer (a connection gone silent). */
  hangGetUpdates = false;
  /** Every token but this one gets 401 Unauthorized. */
  token: string;
  readonly bot: FakeUser;
  webhook: { url: string; secret_token?: string; allowed_updates?: unknown } | null = null;
  /** The update kinds the bot last asked for (getUpdates or setWebhook); null: never said, Telegram's default. */
  allowedUpdates: string[] | null = null;
  /** Answers to callback queries, in the order they came. */
  readonly callbackAnswers: CallbackAnswer[] = [];
  /** Every draft update, in order. */
  readonly drafts: FakeDraft[] = [];
  /** Every text a chat showed, in order, as the user sees it: each post, each edit, each draft update. */
  readonly shown: string[] = [];
  /** Off: sendMessageDraft is "method not found", as on a Bot API older than 9.3. */
  draftsSupported = true;
  /** Edits (and draft updates) of one message (draft) closer together than this get 429 (0: never). */
  minEditIntervalMs = 0;
  /** How many edits and draft updates were refused with 429 for coming too fast. */
  rateLimited = 0;
  /**
   * Per-chat send limits (TELEGRAM_SEND_LIMITS, or scaled down); off when null. A send over the
   * limit gets 429 with retry_after: whole seconds as Telegram sends them, or, for a window under a
   * second, the exact fraction so tests stay fast. Counted in `sendsLimited`.
   */
  sendLimits: SendLimits | null = null;
  sendsLimited = 0;
  /** Requests sent before the retry_after of the 429 that limited their place had passed. */
  readonly earlyRetries: RecordedCall[] = [];

  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  /** The most connections that were open at once. */
  maxOpenConnections = 0;
  private updates: Json[] = [];
  private nextUpdateId = 1;
  private nextMessageId = 1;
  private readonly pollers = new Set<Poller>();
  private readonly hung = new Set<ServerResponse>();
  private readonly scripted = new Map<string, ScriptedError[]>();
  private readonly drops = new Map<string, number>();
  private readonly files = new Map<string, { path: string; data: Buffer; uniqueId: string }>();
  private readonly waiters = new Set<() => void>();
  /** Callback queries delivered and not answered yet. */
  private readonly openQueries = new Set<string>();
  private nextQueryId = 1;
  /** Messages Telegram no longer lets the bot edit (deleted ones leave `sent` instead). */
  private readonly uneditable = new Set<number>();
  /** When each message or draft last changed ("m:<chat>:<id>", "d:<chat>:<id>"), for minEditIntervalMs. */
  private readonly changedAt = new Map<string, number>();
  /** Place (see placeOf) → when the retry_after of its last 429 ends (Date.now() ms). */
  private readonly limitedUntil = new Map<string, number>();
  /** Chat id → when its accepted sends went, for sendLimits. */
  private readonly sendTimes = new Map<number, number[]>();
  /** The next edit or draft update (whichever comes first) fails with this. */
  private editFailure: ScriptedError | undefined;
  /** Forum topics deleted by an admin ("<chat>:<thread>"): sends into them fail as on Telegram. */
  private readonly deletedTopics = new Set<string>();

  private constructor(opts: { token?: string; bot?: Partial<FakeUser> }) {
    this.token = opts.token ?? TOKEN_DEFAULT;
    this.bot = { ...BOT_DEFAULT, ...opts.bot };
    this.server = createServer((req, res) => void this.handle(req, res));
    this.server.on("connection", (socket) => {
      this.sockets.add(socket);
      this.maxOpenConnections = Math.max(this.maxOpenConnections, this.sockets.size);
      socket.on("close", () => this.sockets.delete(socket));
    });
  }

  static async start(opts: { token?: string; bot?: Partial<FakeUser> } = {}): Promise<FakeTelegram> {
    const fake = new FakeTelegram(opts);
    await new Promise<void>((resolve) => fake.server.listen(0, "127.0.0.1", resolve));
    return fake;
  }

  get apiRoot(): string {
    const { port } = this.server.address() as AddressInfo;
    return `http://127.0.0.1:${port}`;
  }

  /** Base URL for an OpenAI client pointed at the fake transcription endpoint. */
  get transcriptionBaseURL(): string {
    return `${this.apiRoot}/openai/v1`;
  }

  callsTo(method: string): RecordedCall[] {
    return this.calls.filter((c) => c.method === method);
  }

  /** The update_id of the last update queued. */
  get lastUpdateId(): number {
    return this.nextUpdateId - 1;
  }

  /** Updates not yet confirmed by a getUpdates offset. */
  get pendingUpdates(): number {
    return this.updates.length;
  }

  // ── scripting ─────────────────────────────────────────────────────────

  /** The next `times` calls of `method` fail with this error. */
  failNext(method: string, error: ScriptedError, times = 1): void {
    const list = this.scripted.get(method) ?? [];
    for (let i = 0; i < times; i++) list.push(error);
    this.scripted.set(method, list);
  }

  /** The next `n` calls of `method` have their connection destroyed (a network error for the client). */
  dropNext(method: string, n = 1): void {
    this.drops.set(method, (this.drops.get(method) ?? 0) + n);
  }

  /** Ends (destroys) the connections of getUpdates requests that are hanging. */
  releaseHung(): void {
    for (const res of this.hung) res.socket?.destroy();
    this.hung.clear();
  }

  /** Registers a downloadable file; returns what a message would carry about it. */
  addFile(content: Buffer | string, opts: { fileId?: string; path?: string } = {}) {
    const data = typeof content === "string" ? Buffer.from(content) : content;
    const fileId = opts.fileId ?? `file-${this.files.size + 1}-${Math.random().toString(36).slice(2, 8)}`;
    const uniqueId = `u${this.files.size + 1}`;
    this.files.set(fileId, { path: opts.path ?? `documents/${fileId}.bin`, data, uniqueId });
    return { file_id: fileId, file_unique_id: uniqueId, file_size: data.length };
  }

  /** Queues an update for getUpdates; returns its update_id. */
  pushUpdate(update: Json): number {
    const update_id = this.nextUpdateId++;
    this.updates.push({ update_id, ...update });
    this.wakePollers();
    return update_id;
  }

  /**
   * A message from a user, with defaults filled in: from user 42 ("Ada",
   * @ada), in the private chat with that user. Returns the message.
   */
  userMessage(fields: Json & { from?: Partial<FakeUser>; chat?: Json }): Json {
    const from = { id: 42, is_bot: false, first_name: "Ada", username: "ada", ...fields.from };
    const chat = fields.chat ?? { id: from.id, type: "private", first_name: from.first_name };
    const message = {
      message_id: this.nextMessageId++,
      date: Math.floor(Date.now() / 1000),
      ...fields,
      from,
      chat,
    };
    this.pushUpdate({ message });
    return message;
  }

  /**
   * `from` presses the button with `data` under the bot's message `messageId`, as Telegram delivers
   * it: a callback_query update carrying that message (as the bot sent it, with its keyboard).
   * Returns the query id, which answerCallbackQuery names.
   */
  pressButton(from: Partial<FakeUser>, messageId: number, data: string): string {
    const sent = this.sent.find((m) => m.messageId === messageId);
    if (!sent) throw new Error(`FakeTelegram: no message ${messageId} to press a button under`);
    const id = `${this.nextQueryId++}${Date.now()}`;
    this.openQueries.add(id);
    this.pushUpdate({
      callback_query: {
        id,
        from: { id: 42, is_bot: false, first_name: "Ada", ...from },
        message: this.messageObject(sent),
        chat_instance: `ci${String(sent.chatId)}`,
        data,
      },
    });
    return id;
  }

  /**
   * `from` blocks the bot in their private chat (Telegram's "Stop and block bot"): a my_chat_member
   * update with the bot's new status "kicked". Returns its update_id.
   */
  userBlocksBot(from: Partial<FakeUser> & { id: number }): number {
    const user = { is_bot: false, first_name: "Ada", ...from };
    return this.pushUpdate({
      my_chat_member: {
        chat: { id: user.id, type: "private", first_name: user.first_name },
        from: user,
        date: Math.floor(Date.now() / 1000),
        old_chat_member: { user: this.bot, status: "member" },
        new_chat_member: { user: this.bot, status: "kicked", until_date: 0 },
      },
    });
  }

  /** The next editMessageText or sendMessageDraft, whichever comes first, fails with `error`. */
  failNextEdit(error: ScriptedError): void {
    this.editFailure = error;
  }

  /** The user deletes the bot's message: editing it then fails with "message to edit not found". */
  userDeletes(messageId: number): void {
    const at = this.sent.findIndex((m) => m.messageId === messageId);
    if (at >= 0) this.sent.splice(at, 1);
  }

  /** An admin deletes a forum topic: every later send into it gets 400 "message thread not found". */
  deleteTopic(chatId: number, threadId: number): void {
    this.deletedTopics.add(`${chatId}:${threadId}`);
  }

  /** The message can no longer be edited (too old, say). */
  freezeMessage(messageId: number): void {
    this.uneditable.add(messageId);
  }

  /** Resolves with fn()'s value once it is truthy (re-checked on every request), or rejects after timeoutMs. */
  async waitFor<T>(fn: () => T | undefined | null | false, timeoutMs = 5000, what = "condition"): Promise<T> {
    const now = fn();
    if (now) return now;
    return new Promise<T>((resolve, reject) => {
      const check = () => {
        const value = fn();
        if (!value) return;
        cleanup();
        resolve(value);
      };
      const poll = setInterval(check, 20);
      // The limit only ends a hung test: never below MIN_WAIT_MS, for loaded machines.
      const limit = Math.max(timeoutMs, MIN_WAIT_MS);
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`FakeTelegram: timed out waiting for ${what}`));
      }, limit);
      const cleanup = () => {
        clearTimeout(timer);
        clearInterval(poll);
        this.waiters.delete(check);
      };
      this.waiters.add(check);
    });
  }

  waitForCall(method: string, predicate: (c: RecordedCall) => boolean = () => true, timeoutMs = 5000) {
    return this.waitFor(
      () => this.calls.find((c) => c.method === method && predicate(c)),
      timeoutMs,
      `a ${method} call`,
    );
  }

  waitForSent(predicate: (m: SentMessage) => boolean = () => true, timeoutMs = 5000) {
    return this.waitFor(() => this.sent.find(predicate), timeoutMs, "a sent message");
  }

  async close(): Promise<void> {
    for (const p of this.pollers) clearTimeout(p.timer);
    this.pollers.clear();
    this.hung.clear();
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      for (const s of this.sockets) s.destroy();
    });
  }

  // ── HTTP ──────────────────────────────────────────────────────────────

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const url = new URL(req.url ?? "/", "http://fake");
      const body = await readAll(req);
      if (req.method === "POST" && url.pathname === "/openai/v1/audio/transcriptions") {
        return await this.transcribe(req, body, res);
      }
      const file = /^\/file\/bot([^/]+)\/(.+)$/.exec(url.pathname);
      if (req.method === "GET" && file) return this.serveFile(file[1]!, decodeURIComponent(file[2]!), res);
      const api = /^\/bot([^/]+)\/([A-Za-z]+)$/.exec(url.pathname);
      if (!api) return send(res, 404, { ok: false, error_code: 404, description: "Not Found" });
      const [, token, method] = api as unknown as [string, string, string];
      const { params, files } = await parseParams(req, body);
      const call: RecordedCall = { method, params, files, at: Date.now() };
      this.calls.push(call);
      this.notify();
      const drops = this.drops.get(method) ?? 0;
      if (drops > 0) {
        this.drops.set(method, drops - 1);
        res.socket?.destroy();
        return;
      }
      if (token !== this.token) return fail(res, { code: 401, description: "Unauthorized" });
      const early = this.earlyRetryWait(call);
      if (early > 0) {
        this.earlyRetries.push(call);
        return this.limit(res, call, early);
      }
      const scripted = this.scripted.get(method)?.shift();
      if (scripted?.code === 429 && scripted.retryAfter !== undefined)
        return this.limit(res, call, scripted.retryAfter, scripted.description);
      if (scripted) return fail(res, scripted);
      if (this.overSendLimit(call, res)) return;
      if (this.editFailure && (method === "editMessageText" || method === "sendMessageDraft")) {
        const failure = this.editFailure;
        this.editFailure = undefined;
        return fail(res, failure);
      }
      await this.dispatch(method, call, res);
    } catch (err) {
      send(res, 500, { ok: false, error_code: 500, description: `Internal Server Error: ${String(err)}` });
    } finally {
      this.notify();
    }
  }

  private notify(): void {
    for (const w of [...this.waiters]) w();
  }

  private async dispatch(method: string, call: RecordedCall, res: ServerResponse): Promise<void> {
    const p = call.params;
    if (
      method.startsWith("send") &&
      this.deletedTopics.has(`${String(p.chat_id)}:${String(p.message_thread_id)}`)
    )
      return fail(res, { code: 400, description: "Bad Request: message thread not found" });
    switch (method) {
      case "getMe":
        return ok(res, {
          ...this.bot,
          can_join_groups: true,
          can_read_all_group_messages: false,
          supports_inline_queries: false,
        });
      case "getUpdates":
        return this.getUpdates(p, res);
      case "deleteWebhook":
        this.webhook = null;
        if (p.drop_pending_updates === true) this.updates = [];
        return ok(res, true);
      case "setWebhook":
        this.webhook = {
          url: String(p.url),
          ...(typeof p.secret_token === "string" ? { secret_token: p.secret_token } : {}),
          allowed_updates: p.allowed_updates,
        };
        this.keepAllowedUpdates(p.allowed_updates);
        if (p.drop_pending_updates === true) this.updates = [];
        return ok(res, true);
      case "getWebhookInfo":
        return ok(res, {
          url: this.webhook?.url ?? "",
          has_custom_certificate: false,
          pending_update_count: this.updates.length,
        });
      case "setMyCommands":
      case "sendChatAction":
        return ok(res, true);
      case "getFile": {
        const f = this.files.get(String(p.file_id));
        if (!f) return fail(res, { code: 400, description: "Bad Request: invalid file_id" });
        return ok(res, {
          file_id: p.file_id,
          file_unique_id: f.uniqueId,
          file_size: f.data.length,
          file_path: f.path,
        });
      }
      case "sendMessage": {
        const text = typeof p.text === "string" ? p.text : "";
        const problem = checkText(text, p.parse_mode) ?? checkKeyboard(p.reply_markup);
        if (problem) return fail(res, { code: 400, description: `Bad Request: ${problem}` });
        return ok(res, this.record(method, p, { text }));
      }
      case "editMessageText":
        return this.editText(p, res);
      case "sendMessageDraft":
        return this.draft(p, res);
      case "answerCallbackQuery": {
        const queryId = String(p.callback_query_id);
        if (!this.openQueries.delete(queryId)) {
          return fail(res, {
            code: 400,
            description: "Bad Request: query is too old and response timeout expired or query ID is invalid",
          });
        }
        const text = typeof p.text === "string" ? p.text : undefined;
        if (text !== undefined && text.length > 200)
          return fail(res, { code: 400, description: "Bad Request: MESSAGE_TOO_LONG" });
        this.callbackAnswers.push({
          queryId,
          ...(text !== undefined ? { text } : {}),
          showAlert: p.show_alert === true,
        });
        return ok(res, true);
      }
      case "sendPhoto":
      case "sendDocument":
      case "sendVoice":
      case "sendAudio":
      case "sendVideo":
      case "sendAnimation": {
        const field = method.slice(4).toLowerCase();
        const file = call.files[field];
        if (!file && typeof p[field] !== "string")
          return fail(res, { code: 400, description: `Bad Request: there is no ${field} in the request` });
        const caption = typeof p.caption === "string" ? p.caption : undefined;
        if (caption !== undefined) {
          const problem = checkText(caption, p.parse_mode, 1024);
          if (problem)
            return fail(res, {
              code: 400,
              description: `Bad Request: ${problem.replace("message", "caption")}`,
            });
        }
        return ok(
          res,
          this.record(method, p, {
            ...(caption !== undefined ? { caption } : {}),
            ...(file ? { file } : {}),
          }),
        );
      }
      default:
        return fail(res, { code: 404, description: "Not Found: method not found" });
    }
  }

  private record(method: string, p: Json, extra: Partial<SentMessage>): Json {
    const reply = p.reply_parameters as { message_id?: number } | undefined;
    const sent: SentMessage = {
      method,
      messageId: this.nextMessageId++,
      chatId: p.chat_id as number | string,
      ...(typeof p.parse_mode === "string" ? { parseMode: p.parse_mode } : {}),
      ...(typeof p.message_thread_id === "number" ? { threadId: p.message_thread_id } : {}),
      ...(reply?.message_id !== undefined ? { replyTo: reply.message_id } : {}),
      silent: p.disable_notification === true,
      buttons: keyboardOf(p.reply_markup) ?? [],
      edits: 0,
      at: Date.now(),
      ...extra,
    };
    this.sent.push(sent);
    this.changedAt.set(`m:${String(sent.chatId)}:${sent.messageId}`, sent.at);
    if (sent.text !== undefined) this.shown.push(visibleText(sent));
    return this.messageObject(sent);
  }

  /**
   * sendMessageDraft as Telegram answers it: only in private chats, a non-zero draft_id, a text
   * Telegram accepts; true. Nothing stays: the draft is gone once a message arrives.
   */
  private draft(p: Json, res: ServerResponse): void {
    if (!this.draftsSupported) return fail(res, { code: 404, description: "Not Found: method not found" });
    const chatId = typeof p.chat_id === "number" ? p.chat_id : Number(p.chat_id);
    if (!Number.isInteger(chatId) || chatId <= 0)
      return fail(res, { code: 400, description: "Bad Request: TEXTDRAFT_PEER_INVALID" });
    const draftId = p.draft_id;
    if (typeof draftId !== "number" || !Number.isInteger(draftId) || draftId === 0)
      return fail(res, { code: 400, description: "Bad Request: invalid draft_id specified" });
    const text = typeof p.text === "string" ? p.text : "";
    const parseMode = typeof p.parse_mode === "string" ? p.parse_mode : undefined;
    const problem = checkText(text, parseMode);
    if (problem) return fail(res, { code: 400, description: `Bad Request: ${problem}` });
    if (this.tooSoon(`d:${chatId}:${draftId}`, res)) return;
    const draft: FakeDraft = {
      chatId,
      draftId,
      text,
      ...(parseMode !== undefined ? { parseMode } : {}),
      ...(typeof p.message_thread_id === "number" ? { threadId: p.message_thread_id } : {}),
      at: Date.now(),
    };
    this.drafts.push(draft);
    this.shown.push(stripTags(text, parseMode));
    ok(res, true);
  }

  /** A change of `key` sooner than minEditIntervalMs after its last one: answered 429, as Telegram does. */
  private tooSoon(key: string, res: ServerResponse): boolean {
    const last = this.changedAt.get(key);
    const wait = last === undefined ? 0 : last + this.minEditIntervalMs - Date.now();
    if (this.minEditIntervalMs <= 0 || wait <= 0) {
      this.changedAt.set(key, Date.now());
      return false;
    }
    this.rateLimited++;
    const retryAfter = Math.max(1, Math.ceil(wait / 1000));
    this.limitPlace(key, retryAfter);
    fail(res, { code: 429, description: `Too Many Requests: retry after ${retryAfter}`, retryAfter });
    return true;
  }

  /** A 429 for the call's place: requests there before `retryAfter` seconds have passed are early. */
  private limit(res: ServerResponse, call: RecordedCall, retryAfter: number, description?: string): void {
    this.limitPlace(placeOf(call), retryAfter);
    fail(res, {
      code: 429,
      description: description ?? `Too Many Requests: retry after ${Math.ceil(retryAfter)}`,
      retryAfter,
    });
  }

  private limitPlace(place: string, retryAfter: number): void {
    const until = Date.now() + retryAfter * 1000;
    this.limitedUntil.set(place, Math.max(until, this.limitedUntil.get(place) ?? 0));
  }

  /** Seconds still left of the retry_after of the last 429 at the call's place; 0 when none. */
  private earlyRetryWait(call: RecordedCall): number {
    const leftMs = (this.limitedUntil.get(placeOf(call)) ?? 0) - Date.now() - CLOCK_GRAIN_MS;
    return leftMs > 0 ? Math.ceil(leftMs) / 1000 : 0;
  }

  /** A send over the chat's limit (sendLimits) is answered 429 with the wait until a slot frees up. */
  private overSendLimit(call: RecordedCall, res: ServerResponse): boolean {
    const limits = this.sendLimits;
    const chatId = Number(call.params.chat_id);
    if (!limits || !SEND_METHODS.has(call.method) || !Number.isInteger(chatId)) return false;
    const { count, windowMs } = chatId > 0 ? limits.privateChat : limits.group;
    const now = Date.now();
    const recent = (this.sendTimes.get(chatId) ?? []).filter((t) => t > now - windowMs);
    this.sendTimes.set(chatId, recent);
    if (recent.length < count) {
      recent.push(now);
      return false;
    }
    this.sendsLimited++;
    const waitMs = recent[0]! + windowMs - now;
    const retryAfter = windowMs >= 1000 ? Math.max(1, Math.ceil(waitMs / 1000)) : Math.ceil(waitMs) / 1000;
    this.limit(res, call, retryAfter);
    return true;
  }

  /** The Message object Telegram returns for a message of the bot (and puts in callback queries). */
  private messageObject(sent: SentMessage): Json {
    const keyboard = sent.buttons.some((row) => row.length > 0);
    return {
      message_id: sent.messageId,
      date: Math.floor(sent.at / 1000),
      chat: { id: Number(sent.chatId), type: Number(sent.chatId) < 0 ? "supergroup" : "private" },
      from: this.bot,
      ...(sent.threadId !== undefined ? { message_thread_id: sent.threadId, is_topic_message: true } : {}),
      ...(sent.text !== undefined ? { text: stripTags(sent.text, sent.parseMode) } : {}),
      ...(sent.caption !== undefined ? { caption: sent.caption } : {}),
      ...(sent.edits > 0 ? { edit_date: Math.floor(Date.now() / 1000) } : {}),
      ...(keyboard ? { reply_markup: { inline_keyboard: sent.buttons } } : {}),
    };
  }

  /**
   * editMessageText as Telegram answers it: the message must exist in that chat and be editable, and
   * the edit must change something (the visible text or the keyboard). Without reply_markup the
   * keyboard goes, as on Telegram.
   */
  private editText(p: Json, res: ServerResponse): void {
    const sent = this.sent.find(
      (m) => m.messageId === p.message_id && String(m.chatId) === String(p.chat_id),
    );
    if (!sent) return fail(res, { code: 400, description: "Bad Request: message to edit not found" });
    if (this.uneditable.has(sent.messageId))
      return fail(res, { code: 400, description: "Bad Request: message can't be edited" });
    if (sent.text === undefined)
      return fail(res, { code: 400, description: "Bad Request: there is no text in the message to edit" });
    const text = typeof p.text === "string" ? p.text : "";
    const parseMode = typeof p.parse_mode === "string" ? p.parse_mode : undefined;
    const problem = checkText(text, parseMode) ?? checkKeyboard(p.reply_markup);
    if (problem) return fail(res, { code: 400, description: `Bad Request: ${problem}` });
    const buttons = keyboardOf(p.reply_markup) ?? [];
    const sameText = stripTags(text, parseMode) === stripTags(sent.text, sent.parseMode);
    const sameButtons =
      JSON.stringify(buttons.filter((r) => r.length)) ===
      JSON.stringify(sent.buttons.filter((r) => r.length));
    if (sameText && sameButtons) {
      return fail(res, {
        code: 400,
        description:
          "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
      });
    }
    if (this.tooSoon(`m:${String(sent.chatId)}:${sent.messageId}`, res)) return;
    sent.text = text;
    if (parseMode !== undefined) sent.parseMode = parseMode;
    else delete sent.parseMode;
    sent.buttons = buttons;
    sent.edits++;
    this.shown.push(visibleText(sent));
    ok(res, this.messageObject(sent));
  }

  private getUpdates(p: Json, res: ServerResponse): void {
    if (this.webhook) {
      return fail(res, {
        code: 409,
        description:
          "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first",
      });
    }
    // A newer request ends the one still waiting, as Telegram does when two instances poll.
    for (const other of this.pollers) {
      this.endPoller(other, () =>
        fail(other.res, {
          code: 409,
          description:
            "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
        }),
      );
    }
    if (this.hangGetUpdates) {
      this.hung.add(res);
      res.on("close", () => this.hung.delete(res));
      return;
    }
    this.keepAllowedUpdates(p.allowed_updates);
    this.discardUnwanted();
    const offset = typeof p.offset === "number" ? p.offset : 0;
    if (offset > 0) this.updates = this.updates.filter((u) => (u.update_id as number) >= offset);
    const limit = typeof p.limit === "number" && p.limit > 0 ? Math.min(p.limit, 100) : 100;
    const timeout = typeof p.timeout === "number" ? p.timeout : 0;
    const ready = this.updates.filter((u) => (u.update_id as number) >= offset).slice(0, limit);
    if (ready.length > 0 || timeout <= 0) return this.deliver(res, ready);
    const poller: Poller = {
      offset,
      limit,
      res,
      done: false,
      timer: setTimeout(() => this.endPoller(poller, () => ok(res, [])), timeout * 1000),
    };
    this.pollers.add(poller);
    res.on("close", () => this.endPoller(poller, () => undefined));
  }

  private deliver(res: ServerResponse, updates: Json[]): void {
    for (const u of updates) this.deliveredUpdateId = Math.max(this.deliveredUpdateId, u.update_id as number);
    ok(res, updates);
  }

  private endPoller(poller: Poller, finish: () => void): void {
    if (poller.done) return;
    poller.done = true;
    clearTimeout(poller.timer);
    this.pollers.delete(poller);
    if (!poller.res.writableEnded && !poller.res.destroyed) finish();
  }

  /** As Telegram does: a list replaces the setting, a call without one keeps it. */
  private keepAllowedUpdates(given: unknown): void {
    if (Array.isArray(given)) this.allowedUpdates = given.map(String);
  }

  /** Updates of kinds the bot did not ask for are dropped, as Telegram never delivers them. */
  private discardUnwanted(): void {
    const wanted = this.allowedUpdates;
    const kindOf = (u: Json) => Object.keys(u).find((k) => k !== "update_id") ?? "";
    const allowed = (kind: string) =>
      wanted && wanted.length > 0 ? wanted.includes(kind) : !NOT_BY_DEFAULT.has(kind);
    this.updates = this.updates.filter((u) => allowed(kindOf(u)));
  }

  private wakePollers(): void {
    this.discardUnwanted();
    for (const poller of [...this.pollers]) {
      const ready = this.updates
        .filter((u) => (u.update_id as number) >= poller.offset)
        .slice(0, poller.limit);
      if (ready.length > 0) this.endPoller(poller, () => this.deliver(poller.res, ready));
    }
  }

  private serveFile(token: string, path: string, res: ServerResponse): void {
    if (token !== this.token) return fail(res, { code: 401, description: "Unauthorized" });
    const file = [...this.files.values()].find((f) => f.path === path);
    if (!file) return fail(res, { code: 404, description: "Not Found" });
    this.fileDownloads++;
    res.writeHead(200, { "content-type": "application/octet-stream", "content-length": file.data.length });
    res.end(file.data);
  }

  private async transcribe(req: IncomingMessage, body: Buffer, res: ServerResponse): Promise<void> {
    const { params, files } = await parseParams(req, body);
    const file = files.file;
    if (!file)
      return send(res, 400, { error: { message: "file is required", type: "invalid_request_error" } });
    this.transcriptions.push({ model: String(params.model), fileName: file.name, size: file.size });
    send(res, 200, { text: this.transcript });
  }
}

// ── helpers ────────────────────────────────────────────────────────────

function readAll(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

async function parseParams(
  req: IncomingMessage,
  body: Buffer,
): Promise<{ params: Json; files: Record<string, FakeFile> }> {
  const type = req.headers["content-type"] ?? "";
  if (type.startsWith("multipart/form-data")) {
    const params: Json = {};
    const uploads = new Map<string, FakeFile>();
    for (const part of parseMultipart(body, type)) {
      if (part.filename === undefined) params[part.name] = parseField(part.data.toString("utf8"));
      else
        uploads.set(part.name, {
          name: part.filename,
          type: part.type,
          size: part.data.length,
          data: part.data,
        });
    }
    // grammy sends files as parts named by a random id, referenced as "attach://<id>".
    const files: Record<string, FakeFile> = {};
    for (const [key, value] of Object.entries(params)) {
      if (typeof value === "string" && value.startsWith("attach://")) {
        const file = uploads.get(value.slice("attach://".length));
        if (file) files[key] = file;
      }
    }
    for (const [key, file] of uploads) if (!Object.values(files).includes(file)) files[key] = file;
    return { params, files };
  }
  if (body.length === 0) return { params: {}, files: {} };
  return { params: JSON.parse(body.toString("utf8")) as Json, files: {} };
}

interface Part {
  name: string;
  filename?: string;
  type: string;
  data: Buffer;
}

/**
 * A tolerant multipart/form-data parser: grammy writes headers without a
 * space after the colon and file names unquoted, which the WHATWG parser in
 * undici refuses (the real Bot API accepts it).
 */
function parseMultipart(body: Buffer, contentType: string): Part[] {
  const boundary = /boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType);
  if (!boundary) throw new Error("multipart without a boundary");
  const delimiter = Buffer.from(`--${boundary[1] ?? boundary[2]}`);
  const parts: Part[] = [];
  let at = body.indexOf(delimiter);
  while (at >= 0) {
    const start = at + delimiter.length;
    if (body.subarray(start, start + 2).toString() === "--") break;
    const next = body.indexOf(delimiter, start);
    if (next < 0) break;
    let chunk = body.subarray(start, next);
    if (chunk.subarray(0, 2).toString() === "\r\n") chunk = chunk.subarray(2);
    if (chunk.subarray(-2).toString() === "\r\n") chunk = chunk.subarray(0, -2);
    const split = chunk.indexOf("\r\n\r\n");
    const head = chunk.subarray(0, split).toString("utf8");
    const data = chunk.subarray(split + 4);
    const name = /name="([^"]*)"/i.exec(head)?.[1] ?? "";
    const filename = /filename=(?:"([^"]*)"|([^;\r\n]+))/i.exec(head);
    const type = /content-type:\s*([^\r\n]+)/i.exec(head)?.[1]?.trim() ?? "text/plain";
    parts.push({ name, type, data, ...(filename ? { filename: filename[1] ?? filename[2]!.trim() } : {}) });
    at = next;
  }
  return parts;
}

function parseField(value: string): unknown {
  if (/^[[{]/.test(value) || value === "true" || value === "false" || /^-?\d+$/.test(value)) {
    try {
      return JSON.parse(value) as unknown;
    } catch {
      return value;
    }
  }
  return value;
}

/**
 * Where a request lands, as far as Telegram's flood control is concerned: a chat for sends, one
 * message (or draft) for edits, else the method (for that chat, if it names one).
 */
function placeOf(call: RecordedCall): string {
  const p = call.params;
  const chat = typeof p.chat_id === "number" || typeof p.chat_id === "string" ? String(p.chat_id) : "";
  if (SEND_METHODS.has(call.method)) return `send:${chat}`;
  if (call.method === "editMessageText") return `m:${chat}:${String(p.message_id)}`;
  if (call.method === "sendMessageDraft") return `d:${chat}:${String(p.draft_id)}`;
  return `${call.method}:${chat}`;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.writableEnded || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

function ok(res: ServerResponse, result: unknown): void {
  send(res, 200, { ok: true, result });
}

function fail(res: ServerResponse, error: ScriptedError): void {
  const parameters = {
    ...(error.retryAfter !== undefined ? { retry_after: error.retryAfter } : {}),
    ...(error.migrateTo !== undefined ? { migrate_to_chat_id: error.migrateTo } : {}),
  };
  send(res, error.code, {
    ok: false,
    error_code: error.code,
    description: error.description,
    ...(Object.keys(parameters).length ? { parameters } : {}),
  });
}

const ALLOWED_TAGS = new Set([
  "b",
  "strong",
  "i",
  "em",
  "u",
  "ins",
  "s",
  "strike",
  "del",
  "span",
  "tg-spoiler",
  "a",
  "code",
  "pre",
  "blockquote",
  "tg-emoji",
]);

/**
 * Telegram's checks of a message text: empty, HTML that does not parse
 * (unknown tags, bad nesting, stray `<` or `&`), too long after parsing.
 * Returns the error description, or null when the text is accepted.
 */
export function checkText(text: string, parseMode: unknown, max = 4096): string | null {
  let visible = text;
  if (parseMode === "HTML") {
    const parsed = parseTelegramHtml(text);
    if (typeof parsed !== "string") return `can't parse entities: ${parsed.error}`;
    visible = parsed;
  }
  if (visible.trim() === "") return "message text is empty";
  if (visible.length > max) return "message is too long";
  return null;
}

/** The visible text of Telegram HTML, or the parse error. */
export function parseTelegramHtml(html: string): string | { error: string } {
  const stack: string[] = [];
  let visible = "";
  for (let i = 0; i < html.length;) {
    const c = html[i]!;
    if (c === "<") {
      const end = html.indexOf(">", i);
      if (end < 0) return { error: `unclosed start tag at byte offset ${i}` };
      const tag = /^<(\/?)([a-z-]+)((?:\s+[a-z-]+(?:="[^"]*")?)*)\s*>$/i.exec(html.slice(i, end + 1));
      if (!tag) return { error: `Unsupported start tag at byte offset ${i}` };
      const [, closing, rawName = ""] = tag;
      const name = rawName.toLowerCase();
      if (!ALLOWED_TAGS.has(name)) return { error: `Unsupported start tag "${name}" at byte offset ${i}` };
      if (closing) {
        const open = stack.pop();
        if (open !== name)
          return { error: `Can't find end tag corresponding to start tag "${open ?? name}"` };
      } else {
        stack.push(name);
      }
      i = end + 1;
      continue;
    }
    if (c === "&") {
      const entity = /^&(lt|gt|amp|quot|#\d{1,7}|#x[0-9a-f]{1,6});/i.exec(html.slice(i, i + 12));
      if (!entity) return { error: `Unsupported HTML entity at byte offset ${i}` };
      const e = entity[1]!.toLowerCase();
      visible +=
        e === "lt"
          ? "<"
          : e === "gt"
            ? ">"
            : e === "amp"
              ? "&"
              : e === "quot"
                ? '"'
                : String.fromCodePoint(Number(e.startsWith("#x") ? `0x${e.slice(2)}` : e.slice(1)));
      i += entity[0].length;
      continue;
    }
    if (c === ">") return { error: `Unexpected end of tag at byte offset ${i}` };
    visible += c;
    i++;
  }
  if (stack.length > 0)
    return { error: `Can't find end tag corresponding to start tag "${stack[stack.length - 1]}"` };
  return visible;
}

/** The text of a message as the user sees it (tags gone, entities decoded). */
export function visibleText(m: Pick<SentMessage, "text" | "caption" | "parseMode">): string {
  return stripTags(m.text ?? m.caption ?? "", m.parseMode);
}

/** The inline keyboard of a reply_markup, or undefined when there is none. */
function keyboardOf(markup: unknown): FakeButton[][] | undefined {
  const rows = (markup as { inline_keyboard?: unknown } | undefined)?.inline_keyboard;
  return Array.isArray(rows) ? (rows as FakeButton[][]) : undefined;
}

/** Telegram's checks of an inline keyboard: rows of buttons with text and callback data of 1–64 bytes. */
function checkKeyboard(markup: unknown): string | null {
  if (markup === undefined) return null;
  const rows = keyboardOf(markup);
  if (!rows) return "object expected as reply markup";
  for (const row of rows) {
    if (!Array.isArray(row))
      return 'field "inline_keyboard" of the InlineKeyboardMarkup must be an Array of Arrays';
    for (const button of row) {
      if (typeof button.text !== "string" || button.text === "")
        return "text buttons are unallowed in the inline keyboard";
      if (button.callback_data !== undefined) {
        const bytes = Buffer.byteLength(button.callback_data);
        if (bytes < 1 || bytes > 64) return "BUTTON_DATA_INVALID";
      } else if (button.url === undefined) return "text buttons are unallowed in the inline keyboard";
      if (button.style !== undefined && !["danger", "success", "primary"].includes(button.style))
        return "BUTTON_STYLE_INVALID";
    }
  }
  return null;
}

function stripTags(text: string, parseMode: string | undefined): string {
  if (parseMode !== "HTML") return text;
  const parsed = parseTelegramHtml(text);
  return typeof parsed === "string" ? parsed : text;
}
