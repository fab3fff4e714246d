/**
 * A loopback fake of Slack: the Web API (the methods palaver uses), file
 * downloads and uploads, and a Socket Mode WebSocket server, enough for the
 * real clients @slack/bolt runs on (Socket Mode and Web API) to run unmodified.
 *
 *   const slack = await FakeSlack.start();
 *   config: { botToken: slack.botToken, appToken: slack.appToken, apiUrl: slack.apiUrl }
 *   await slack.waitForConnections(1);                  // Socket Mode said hello
 *   await slack.pushEvent(dm("hello"));                 // resolves with the client's ack
 *   await slack.waitForCalls("chat.postMessage", 1);
 *   slack.callsTo("chat.postMessage")[0].params.text
 *   slack.rateLimit("chat.postMessage", 1);             // next call: 429, Retry-After: 1
 *   slack.failNext("chat.postMessage", "channel_not_found"); // next call: { ok: false, error }
 *   slack.minUpdateIntervalMs = 1000;                   // chat.update of one message faster: 429
 *   slack.shown                                         // every text a bot message showed: posts, updates
 *   await slack.pressButton("U1", "D1", ts, "Approve");  // a block_actions interaction, resolves with the ack
 *   slack.ephemerals                                    // chat.postEphemeral: what one person alone saw
 *   await slack.closeSocket();                          // the client must reconnect
 *   await slack.close();
 *
 * It also answers an OpenAI-style POST /openai/v1/audio/transcriptions with
 * `transcript` (point `transcription` at `transcriptionBaseURL`).
 *
 * Events pushed while no socket is connected are queued and delivered on the
 * next connection, and events a closed socket never acknowledged are sent
 * again (retry_attempt + 1), as Slack does. An event's envelope not acknowledged
 * within `ackWindowMs` (3 s, Slack's limit) is sent again too, with
 * retry_reason "timeout", at most `maxRetries` (3) times; `ackTimes` records
 * how long each acknowledgement took.
 *
 * The Events API over HTTP: sendEventOverHttp(target, event) posts a signed
 * event_callback to the app's request URL, as Slack does, and sends it again
 * with `X-Slack-Retry-Num` / `X-Slack-Retry-Reason` (http_timeout, http_error)
 * when no HTTP 200 came within `ackWindowMs`, at most `maxRetries` times, after
 * `httpRetryDelaysMs`; `httpDeliveries` records every attempt. `loseAcks`
 * lets the next acknowledgements (either kind) get lost on the way.
 *
 * Rate limits: after a 429 (rateLimit, minUpdateIntervalMs) a call of the same
 * method (for chat.update: of the same message) sent before its Retry-After
 * has passed is answered 429 again and recorded in `earlyRetries`;
 * endRateLimits() lets every Retry-After pass at once (the app was down meanwhile).
 */
import { randomUUID } from "node:crypto";
import { createHmac } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { WebSocket, WebSocketServer } from "ws";
import { MIN_WAIT_MS } from "../helpers/wait.js";

export const BOT_TOKEN = "xoxb-fake-bot-token";
export const APP_TOKEN = "xapp-fake-app-token";
export const BOT_USER_ID = "UBOT";
export const BOT_ID = "BBOT";
export const TEAM_ID = "T1";

export interface SlackCall {
  method: string;
  /** The token the call was made with (Authorization header or `token` parameter). */
  token: string | undefined;
  params: Record<string, unknown>;
  at: number;
}

export interface Ack {
  envelope_id: string;
  payload?: unknown;
}

export interface StoredMessage {
  ts: string;
  user?: string;
  bot_id?: string;
  text?: string;
  thread_ts?: string;
  /** Block Kit blocks, as posted or last updated (chat.update with `blocks: []` removes them). */
  blocks?: Block[];
  /** The ts of the last chat.update. */
  edited?: string;
}

/** A Block Kit block as the fake reads it: sections and actions with buttons. */
export interface Block {
  type: string;
  block_id?: string;
  text?: { type: string; text: string };
  elements?: { type: string; action_id?: string; value?: string; style?: string; text?: { text: string } }[];
}

/** A chat.postEphemeral that Slack accepted: shown to `user` alone. */
export interface Ephemeral {
  channel: string;
  user: string;
  text: string;
  thread_ts?: string;
}

/** A bot message as chat.postMessage accepted it. */
export interface Delivery {
  channel: string;
  text: string;
  thread_ts?: string;
}

/** A text a bot message showed: as posted, or as a chat.update rewrote it. */
export interface Shown {
  channel: string;
  ts: string;
  text: string;
  how: "post" | "update";
}

export interface Upload {
  fileId: string;
  filename: string;
  bytes: Buffer;
  channelId?: string;
  threadTs?: string;
}

interface Envelope {
  envelope_id: string;
  type: string;
  payload: Record<string, unknown>;
  accepts_response_payload: boolean;
  retry_attempt?: number;
  retry_reason?: string;
}

interface Pending {
  envelope: Envelope;
  resolve: (ack: Ack) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
  /** Sends it again when no ack came within ackWindowMs of the last delivery. */
  retryTimer?: NodeJS.Timeout;
  deliveredAt?: number;
}

/** One HTTP delivery of an event to the app's request URL. */
export interface HttpDelivery {
  eventId: string;
  /** 0 for the first, then X-Slack-Retry-Num. */
  attempt: number;
  retryReason?: string;
  /** The app's answer (none when it came too late or not at all). */
  status?: number;
  /** How long the answer took, when one came within ackWindowMs. */
  ackMs?: number;
}

/** Where Slack posts events in HTTP mode: the app's request URL and its signing secret. */
export interface HttpTarget {
  url: string;
  signingSecret: string;
}

export interface FakeSlackOptions {
  botToken?: string;
  appToken?: string;
  /** How long pushEvent waits for an ack (default MIN_WAIT_MS: it only ends a hung test). */
  ackTimeoutMs?: number;
}

/** Slack's time for an acknowledgement (HTTP 200, or a Socket Mode envelope's ack). */
export const SLACK_ACK_WINDOW_MS = 3000;

export class FakeSlack {
  readonly calls: SlackCall[] = [];
  readonly acks: Ack[] = [];
  readonly uploads: Upload[] = [];
  /** Ids of the files fetched from their private URLs, in order. */
  readonly downloads: string[] = [];
  /** `channel:ts` → reaction names currently on that message. */
  readonly reactions = new Map<string, Set<string>>();
  /** Messages per channel, for conversations.replies (posted ones are added too). */
  readonly messages = new Map<string, StoredMessage[]>();
  readonly users = new Map<string, { name: string; real_name?: string; team_id?: string }>();
  /** chat.postEphemeral calls Slack accepted, in order. */
  readonly ephemerals: Ephemeral[] = [];
  /** Every text a bot message showed, in order: each accepted post and update. */
  readonly shown: Shown[] = [];
  /**
   * Slack's rate limit on edits, per message: a chat.update that comes sooner than this after the
   * message's last accepted post or update gets HTTP 429 with Retry-After (whole seconds, as Slack
   * sends them). 0 (the default): no limit.
   */
  minUpdateIntervalMs = 0;
  /** How many chat.update calls that limit answered with 429. */
  updatesLimited = 0;
  /** How many Socket Mode connections said hello so far. */
  connections = 0;
  /** An acknowledgement later than this is none: the event is sent again (Slack: 3 s). */
  ackWindowMs = SLACK_ACK_WINDOW_MS;
  /** How many times an unacknowledged event is sent again (Slack: 3). */
  maxRetries = 3;
  /** HTTP mode: the wait before each retry (Slack: nearly at once, then 1 minute, then 5). */
  httpRetryDelaysMs = [0, 60_000, 300_000];
  /**
   * The app's next acknowledgements (HTTP answers, Socket Mode acks) are lost on the way: Slack saw
   * none within ackWindowMs and sends the event again.
   */
  loseAcks = 0;
  /** Every HTTP delivery of an event, retries included. */
  readonly httpDeliveries: HttpDelivery[] = [];
  /** Socket Mode: how long each acknowledgement took after its (last) delivery, by envelope. */
  readonly ackTimes: { envelopeId: string; ms: number }[] = [];
  /** Envelopes sent again because no ack came within ackWindowMs. */
  socketRetries = 0;
  /** Web API calls sent before the Retry-After of the 429 that limited them had passed. */
  readonly earlyRetries: SlackCall[] = [];
  /** Web API calls are answered after this long (a slow Slack), so calls made together overlap. */
  apiLatencyMs = 0;
  /** The most Web API calls that were being answered at once. */
  maxApiCallsAtOnce = 0;
  /** What the transcription endpoint answers. */
  transcript = "hello from a voice note";
  /** Every transcription request: the model and the uploaded file. */
  readonly transcriptions: { model: string; fileName: string; size: number }[] = [];
  /** Answer file downloads with Slack's sign-in page, as for a token without files:read. */
  signInPageForFiles = false;
  readonly botToken: string;
  readonly appToken: string;

  private readonly server: Server;
  private readonly wss = new WebSocketServer({ noServer: true });
  private readonly sockets = new Set<Socket>();
  private readonly files = new Map<string, { name: string; bytes: Buffer; mimetype: string }>();
  private readonly tickets = new Set<string>();
  private readonly rateLimits = new Map<string, { retryAfter: string; times: number }>();
  private readonly failures = new Map<string, { error: string; times: number }>();
  private readonly queue: Pending[] = [];
  private readonly deliveries: Delivery[] = [];
  /** Where each accepted post is, in order: the messages themselves change with edits. */
  private readonly posts: { channel: string; ts: string }[] = [];
  private readonly inFlight = new Map<string, Pending>();
  private apiCallsNow = 0;
  /** `channel:ts` → when that message was last posted or updated (for minUpdateIntervalMs). */
  private readonly lastWrite = new Map<string, number>();
  /** Method (chat.update: per message) → when the Retry-After of its last 429 ends (Date.now() ms). */
  private readonly limitedUntil = new Map<string, number>();
  private readonly waiters = new Set<() => void>();
  private current: WebSocket | undefined;
  private nextTs = 1_700_000_000;
  private nextId = 1;
  private readonly ackTimeoutMs: number;

  private constructor(opts: FakeSlackOptions) {
    this.botToken = opts.botToken ?? BOT_TOKEN;
    this.appToken = opts.appToken ?? APP_TOKEN;
    this.ackTimeoutMs = opts.ackTimeoutMs ?? MIN_WAIT_MS;
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        res.writeHead(500).end(String(err));
      });
    });
    this.server.on("connection", (socket: Socket) => {
      this.sockets.add(socket);
      socket.on("close", () => this.sockets.delete(socket));
    });
    this.server.on("upgrade", (req: IncomingMessage, socket: Socket, head: Buffer) =>
      this.upgrade(req, socket, head),
    );
    this.users.set("U1", { name: "alice", real_name: "Alice" });
    this.users.set("U2", { name: "bob", real_name: "Bob" });
  }

  static async start(opts: FakeSlackOptions = {}): Promise<FakeSlack> {
    const fake = new FakeSlack(opts);
    await new Promise<void>((resolve) => fake.server.listen(0, "127.0.0.1", resolve));
    return fake;
  }

  get baseUrl(): string {
    const { port } = this.server.address() as AddressInfo;
    return `http://127.0.0.1:${port}`;
  }

  /** The Web API base for `channels.slack.apiUrl` (the Web API client's slackApiUrl). */
  get apiUrl(): string {
    return `${this.baseUrl}/api/`;
  }

  /** Base URL for an OpenAI client pointed at the fake transcription endpoint. */
  get transcriptionBaseURL(): string {
    return `${this.baseUrl}/openai/v1`;
  }

  /** Whether a Socket Mode client is connected now. */
  get connected(): boolean {
    return this.current?.readyState === WebSocket.OPEN;
  }

  callsTo(method: string): SlackCall[] {
    return this.calls.filter((c) => c.method === method);
  }

  /** The texts posted with chat.postMessage, in order. */
  posted(): { channel: string; text: string; thread_ts?: string }[] {
    const str = (v: unknown) => (typeof v === "string" ? v : "");
    return this.callsTo("chat.postMessage").map((c) => ({
      channel: str(c.params.channel),
      text: str(c.params.text),
      ...(c.params.thread_ts ? { thread_ts: str(c.params.thread_ts) } : {}),
    }));
  }

  /** The messages chat.postMessage accepted (failed and rate-limited calls are not among them), in order. */
  delivered(): Delivery[] {
    return this.deliveries.slice();
  }

  /** The bot's accepted posts in order, each as Slack holds it now (edits applied). */
  botMessages(): { channel: string; message: StoredMessage }[] {
    return this.posts.flatMap(({ channel, ts }) => {
      const message = this.message(channel, ts);
      return message ? [{ channel, message }] : [];
    });
  }

  /** A message as Slack holds it now (edits applied), if there is one at that ts. */
  message(channel: string, ts: string): StoredMessage | undefined {
    return this.messages.get(channel)?.find((m) => m.ts === ts);
  }

  /** The button labels under a message, as Slack shows them now. */
  buttonsOf(message: StoredMessage | undefined): string[] {
    return buttons(message).map((b) => b.text?.text ?? "");
  }

  /** What a message shows: its sections' text when it has blocks, else its text. */
  shownText(message: StoredMessage | undefined): string {
    const sections = (message?.blocks ?? []).flatMap((b) =>
      b.type === "section" && b.text ? [b.text.text] : [],
    );
    return sections.length ? sections.join("\n") : (message?.text ?? "");
  }

  /** The Retry-After of every 429 so far has passed (time went by while the app was down, say). */
  endRateLimits(): void {
    this.limitedUntil.clear();
  }

  /** The next `times` calls of `method` get HTTP 429 with this Retry-After (seconds). */
  rateLimit(method: string, retryAfterSeconds: number, times = 1): void {
    this.rateLimits.set(method, { retryAfter: String(retryAfterSeconds), times });
  }

  /** The next `times` calls of `method` answer `{ ok: false, error }`. */
  failNext(method: string, error: string, times = 1): void {
    this.failures.set(method, { error, times });
  }

  /**
   * A file to share in an event: served at its url_private_download to the bot token only. `extra`
   * adds fields of Slack's file object (`subtype: "slack_audio"` for a recorded clip).
   */
  addFile(
    name: string,
    content: string | Buffer,
    mimetype = "text/plain",
    extra: Record<string, unknown> = {},
  ): Record<string, unknown> {
    const id = `F${this.nextId++}`;
    const bytes = Buffer.isBuffer(content) ? content : Buffer.from(content);
    this.files.set(id, { name, bytes, mimetype });
    const url = `${this.baseUrl}/files-pri/${TEAM_ID}-${id}/${encodeURIComponent(name)}`;
    return {
      id,
      name,
      title: name,
      mimetype,
      size: bytes.length,
      mode: "hosted",
      url_private: url,
      url_private_download: `${url}?download=1`,
      ...extra,
    };
  }

  /** A message Slack knows about (for conversations.replies), e.g. an earlier thread reply. */
  addMessage(channel: string, message: StoredMessage): void {
    const list = this.messages.get(channel) ?? [];
    list.push(message);
    this.messages.set(channel, list);
  }

  /** A fresh message timestamp, Slack style. */
  ts(): string {
    return `${this.nextTs++}.000100`;
  }

  // ---------------------------------------------------------------------------
  // Socket Mode

  /** Pushes an Events API event; resolves with the client's ack (queued while nobody is connected). */
  pushEvent(event: Record<string, unknown>): Promise<Ack> {
    return this.push({
      envelope_id: randomUUID(),
      type: "events_api",
      accepts_response_payload: false,
      retry_attempt: 0,
      retry_reason: "",
      payload: this.eventCallback(event),
    });
  }

  /**
   * Posts an Events API event to the app's request URL, signed, as Slack does in HTTP mode; sends it
   * again (X-Slack-Retry-Num, X-Slack-Retry-Reason) while no HTTP 200 comes within ackWindowMs, at
   * most maxRetries times. Resolves with this event's deliveries once one was acknowledged or the
   * retries ran out. `target`: the app's request URL, or where each attempt goes (the instances
   * behind a load balancer, which sends a retry to one that is alive).
   */
  async sendEventOverHttp(
    target: HttpTarget | ((attempt: number) => HttpTarget),
    event: Record<string, unknown>,
  ): Promise<HttpDelivery[]> {
    const payload = this.eventCallback(event);
    const eventId = String(payload.event_id);
    const body = JSON.stringify(payload);
    const mine: HttpDelivery[] = [];
    let reason: string | undefined;
    for (let attempt = 0; attempt <= this.maxRetries; attempt++) {
      if (attempt > 0) await sleep(this.httpRetryDelaysMs[attempt - 1] ?? 0);
      const to = typeof target === "function" ? target(attempt) : target;
      const delivery: HttpDelivery = { eventId, attempt, ...(reason ? { retryReason: reason } : {}) };
      mine.push(delivery);
      this.httpDeliveries.push(delivery);
      const headers: Record<string, string> = {
        "content-type": "application/json",
        ...signSlackRequest(to.signingSecret, body),
        ...(reason ? { "x-slack-retry-num": String(attempt), "x-slack-retry-reason": reason } : {}),
      };
      const started = Date.now();
      try {
        const res = await fetch(to.url, {
          method: "POST",
          body,
          headers,
          signal: AbortSignal.timeout(this.ackWindowMs),
        });
        await res.arrayBuffer();
        const lost = this.loseAcks > 0;
        if (lost) this.loseAcks--;
        if (!lost) {
          delivery.status = res.status;
          delivery.ackMs = Date.now() - started;
        }
        reason = lost ? "http_timeout" : res.status === 200 ? undefined : "http_error";
      } catch (err) {
        reason = err instanceof Error && err.name === "TimeoutError" ? "http_timeout" : "connection_failed";
      } finally {
        this.notify();
      }
      if (!reason) break;
    }
    return mine;
  }

  /** The event_callback payload Slack wraps an event in (Socket Mode and HTTP alike). */
  private eventCallback(event: Record<string, unknown>): Record<string, unknown> {
    return {
      token: "verification-token",
      team_id: TEAM_ID,
      api_app_id: "A1",
      event: { event_ts: event.ts, ...event },
      type: "event_callback",
      event_id: `Ev${this.nextId++}`,
      event_time: Math.floor(Date.now() / 1000),
      authorizations: [
        {
          enterprise_id: null,
          team_id: TEAM_ID,
          user_id: BOT_USER_ID,
          is_bot: true,
          is_enterprise_install: false,
        },
      ],
    };
  }

  /** Pushes a slash command invocation (`/palaver stop` → { text: "stop" }). */
  pushCommand(cmd: {
    text: string;
    user_id: string;
    channel_id: string;
    command?: string;
    user_name?: string;
  }): Promise<Ack> {
    return this.push({
      envelope_id: randomUUID(),
      type: "slash_commands",
      accepts_response_payload: true,
      payload: {
        token: "verification-token",
        team_id: TEAM_ID,
        team_domain: "fake",
        channel_id: cmd.channel_id,
        channel_name: cmd.channel_id.startsWith("D") ? "directmessage" : "general",
        user_id: cmd.user_id,
        user_name: cmd.user_name ?? this.users.get(cmd.user_id)?.name ?? "someone",
        command: cmd.command ?? "/palaver",
        text: cmd.text,
        api_app_id: "A1",
        is_enterprise_install: "false",
        response_url: `${this.baseUrl}/commands/response`,
        trigger_id: `trigger-${this.nextId++}`,
      },
    });
  }

  /**
   * The block_actions payload Slack sends when `user` presses the button labelled `label` under the
   * message at `ts` (for Socket Mode, pressButton; for HTTP, POST it as `payload=` to the events URL).
   */
  blockActions(user: string, channel: string, ts: string, label: string): Record<string, unknown> {
    const message = this.message(channel, ts);
    if (!message) throw new Error(`fake Slack: no message ${ts} in ${channel}`);
    const block = (message.blocks ?? []).find((b) =>
      b.elements?.some((e) => e.type === "button" && e.text?.text === label),
    );
    const button = block?.elements?.find((e) => e.type === "button" && e.text?.text === label);
    if (!block || !button) throw new Error(`fake Slack: no button "${label}" under message ${ts}`);
    const name = this.users.get(user)?.name ?? "someone";
    const actionTs = `${Date.now() / 1000}`;
    return {
      type: "block_actions",
      user: { id: user, username: name, name, team_id: TEAM_ID },
      api_app_id: "A1",
      token: "verification-token",
      container: {
        type: "message",
        message_ts: ts,
        channel_id: channel,
        is_ephemeral: false,
        ...(message.thread_ts ? { thread_ts: message.thread_ts } : {}),
      },
      trigger_id: `trigger-${this.nextId++}`,
      team: { id: TEAM_ID, domain: "fake" },
      enterprise: null,
      is_enterprise_install: false,
      channel: { id: channel, name: channel.startsWith("D") ? "directmessage" : "general" },
      message: { type: "message", ...message },
      state: { values: {} },
      response_url: `${this.baseUrl}/actions/response`,
      actions: [
        {
          type: "button",
          action_id: button.action_id,
          block_id: block.block_id,
          text: { type: "plain_text", text: label, emoji: true },
          ...(button.value !== undefined ? { value: button.value } : {}),
          ...(button.style ? { style: button.style } : {}),
          action_ts: actionTs,
        },
      ],
    };
  }

  /** `user` presses a button over Socket Mode (an "interactive" envelope); resolves with the client's ack. */
  pressButton(user: string, channel: string, ts: string, label: string): Promise<Ack> {
    return this.pushInteraction(this.blockActions(user, channel, ts, label));
  }

  /** Pushes any interactivity payload (block_actions, view_submission ...) over Socket Mode. */
  pushInteraction(payload: Record<string, unknown>): Promise<Ack> {
    return this.push({
      envelope_id: randomUUID(),
      type: "interactive",
      accepts_response_payload: false,
      payload,
    });
  }

  /** Resolves once `n` Socket Mode connections in total have been greeted. */
  waitForConnections(n: number, timeoutMs = 5000): Promise<void> {
    return this.waitUntil(
      () => this.connections >= n && this.connected,
      timeoutMs,
      `${n} socket connections`,
    );
  }

  /** Resolves once `method` was called at least `n` times. */
  waitForCalls(method: string, n: number, timeoutMs = 5000): Promise<SlackCall[]> {
    return this.waitUntil(() => this.callsTo(method).length >= n, timeoutMs, `${n} ${method} calls`).then(
      () => this.callsTo(method),
    );
  }

  /** Resolves when no Socket Mode client is connected (after a client's disconnect, say). */
  waitForDisconnect(timeoutMs = 5000): Promise<void> {
    return this.waitUntil(() => this.wss.clients.size === 0, timeoutMs, "the socket to close");
  }

  /**
   * Ends the current connection: "disconnect" sends Slack's `{type:"disconnect"}`
   * message (the client closes), "close" a close frame, "terminate" drops the TCP
   * connection. Resolves once the server saw the socket close.
   */
  async closeSocket(how: "disconnect" | "close" | "terminate" = "close"): Promise<void> {
    const ws = this.current;
    if (!ws) return;
    const closed = new Promise<void>((resolve) => ws.once("close", () => resolve()));
    if (how === "disconnect") ws.send(JSON.stringify({ type: "disconnect", reason: "refresh_requested" }));
    else if (how === "close") ws.close(1001, "going away");
    else ws.terminate();
    await closed;
  }

  private push(envelope: Envelope): Promise<Ack> {
    return new Promise<Ack>((resolve, reject) => {
      const timer = setTimeout(() => {
        clearTimeout(pending.retryTimer);
        this.inFlight.delete(envelope.envelope_id);
        const i = this.queue.findIndex((p) => p.envelope === envelope);
        if (i >= 0) this.queue.splice(i, 1);
        reject(
          new Error(`no ack for ${envelope.type} ${envelope.envelope_id} within ${this.ackTimeoutMs} ms`),
        );
      }, this.ackTimeoutMs);
      const pending: Pending = { envelope, resolve, reject, timer };
      if (this.connected) this.deliver(pending);
      else this.queue.push(pending);
    });
  }

  private deliver(pending: Pending): void {
    this.inFlight.set(pending.envelope.envelope_id, pending);
    pending.deliveredAt = Date.now();
    this.current?.send(JSON.stringify(pending.envelope));
    clearTimeout(pending.retryTimer);
    pending.retryTimer = setTimeout(() => this.resendUnacked(pending), this.ackWindowMs);
  }

  /** No ack within the window: Slack sends the envelope again, up to maxRetries times. */
  private resendUnacked(pending: Pending): void {
    const { envelope } = pending;
    if (!this.inFlight.has(envelope.envelope_id) || !this.connected) return;
    // Slack retries events only: a slash command or a press without an ack fails in front of the user.
    if (envelope.type !== "events_api" || (envelope.retry_attempt ?? 0) >= this.maxRetries) return;
    envelope.retry_attempt = (envelope.retry_attempt ?? 0) + 1;
    envelope.retry_reason = "timeout";
    this.socketRetries++;
    this.deliver(pending);
  }

  private upgrade(req: IncomingMessage, socket: Socket, head: Buffer): void {
    const url = new URL(req.url ?? "/", this.baseUrl);
    const ticket = url.searchParams.get("ticket") ?? "";
    if (url.pathname !== "/link/" || !this.tickets.delete(ticket)) {
      socket.end("HTTP/1.1 401 Unauthorized\r\nConnection: close\r\n\r\n");
      return;
    }
    this.wss.handleUpgrade(req, socket, head, (ws) => this.connected_(ws));
  }

  private connected_(ws: WebSocket): void {
    this.current = ws;
    ws.on("message", (data: Buffer) => {
      let msg: Ack;
      try {
        msg = JSON.parse(data.toString()) as Ack;
      } catch {
        return;
      }
      if (typeof msg.envelope_id !== "string") return;
      const pending = this.inFlight.get(msg.envelope_id);
      if (pending && this.loseAcks > 0) {
        this.loseAcks--;
        return;
      }
      this.acks.push(msg);
      if (!pending) return;
      this.inFlight.delete(msg.envelope_id);
      clearTimeout(pending.timer);
      clearTimeout(pending.retryTimer);
      this.ackTimes.push({ envelopeId: msg.envelope_id, ms: Date.now() - (pending.deliveredAt ?? 0) });
      pending.resolve(msg);
    });
    ws.on("close", () => {
      if (this.current === ws) this.current = undefined;
      // Slack sends what was never acknowledged again, on the next connection.
      for (const pending of this.inFlight.values()) {
        clearTimeout(pending.retryTimer);
        pending.envelope.retry_attempt = (pending.envelope.retry_attempt ?? 0) + 1;
        pending.envelope.retry_reason = "timeout";
        this.queue.push(pending);
      }
      this.inFlight.clear();
      this.notify();
    });
    ws.send(
      JSON.stringify({
        type: "hello",
        num_connections: 1,
        debug_info: { host: "fake-applink", build_number: 1, approximate_connection_time: 18060 },
        connection_info: { app_id: "A1" },
      }),
    );
    this.connections++;
    for (const pending of this.queue.splice(0)) this.deliver(pending);
    this.notify();
  }

  // ---------------------------------------------------------------------------
  // HTTP

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", this.baseUrl);
    const body = await readBody(req);
    if (req.method === "GET" && url.pathname.startsWith("/files-pri/")) return this.serveFile(req, res, url);
    if (req.method === "POST" && url.pathname === "/openai/v1/audio/transcriptions") {
      return this.transcribe(req, res, body);
    }
    if (req.method === "POST" && url.pathname.startsWith("/upload/")) {
      return this.receiveUpload(req, res, url.pathname.slice("/upload/".length), body);
    }
    if (req.method === "POST" && url.pathname.startsWith("/api/")) {
      this.apiCallsNow++;
      this.maxApiCallsAtOnce = Math.max(this.maxApiCallsAtOnce, this.apiCallsNow);
      res.once("close", () => this.apiCallsNow--);
      if (this.apiLatencyMs > 0) await new Promise((resolve) => setTimeout(resolve, this.apiLatencyMs));
      const method = url.pathname.slice("/api/".length);
      const params = await parseParams(req, body);
      const auth = req.headers.authorization;
      const token = auth?.startsWith("Bearer ")
        ? auth.slice(7)
        : typeof params.token === "string"
          ? params.token
          : undefined;
      this.calls.push({ method, token, params, at: Date.now() });
      this.notify();
      const early = this.earlyRetryWait(method, params);
      if (early > 0) {
        this.earlyRetries.push(this.calls[this.calls.length - 1]!);
        return this.rateLimited(res, method, params, Math.ceil(early / 1000));
      }
      const limited = this.rateLimits.get(method);
      if (limited && limited.times > 0) {
        limited.times--;
        return this.rateLimited(res, method, params, Number(limited.retryAfter));
      }
      const wait = method === "chat.update" ? this.updateWait(params) : 0;
      if (wait > 0) {
        this.updatesLimited++;
        return this.rateLimited(res, method, params, Math.ceil(wait / 1000));
      }
      const result = this.api(method, token, params);
      res.writeHead(200, { "content-type": "application/json; charset=utf-8" });
      res.end(JSON.stringify(result));
      return;
    }
    res.writeHead(404).end();
  }

  /** HTTP 429 with Retry-After (whole seconds, as Slack sends them); calls there sooner are early. */
  private rateLimited(
    res: ServerResponse,
    method: string,
    params: Record<string, unknown>,
    retryAfterSeconds: number,
  ): void {
    const place = limitPlace(method, params);
    const until = Date.now() + retryAfterSeconds * 1000;
    this.limitedUntil.set(place, Math.max(until, this.limitedUntil.get(place) ?? 0));
    res.writeHead(429, { "retry-after": String(retryAfterSeconds), "content-type": "application/json" });
    res.end(JSON.stringify({ ok: false, error: "ratelimited" }));
  }

  /** Ms still left of the Retry-After of the last 429 for this call's method (or message); 0: none. */
  private earlyRetryWait(method: string, params: Record<string, unknown>): number {
    const left = (this.limitedUntil.get(limitPlace(method, params)) ?? 0) - Date.now() - CLOCK_GRAIN_MS;
    return Math.max(0, left);
  }

  /** How much sooner than minUpdateIntervalMs this chat.update comes (0: in time). */
  private updateWait(p: Record<string, unknown>): number {
    if (this.minUpdateIntervalMs <= 0) return 0;
    const last = this.lastWrite.get(`${String(p.channel)}:${String(p.ts)}`);
    return last === undefined ? 0 : last + this.minUpdateIntervalMs - Date.now();
  }

  /** A bot message's text changed: remembered for shown and for the edit rate limit. */
  private wrote(channel: string, ts: string, text: string, how: Shown["how"]): void {
    this.shown.push({ channel, ts, text, how });
    this.lastWrite.set(`${channel}:${ts}`, Date.now());
  }

  private api(
    method: string,
    token: string | undefined,
    p: Record<string, unknown>,
  ): Record<string, unknown> {
    const failure = this.failures.get(method);
    if (failure && failure.times > 0) {
      failure.times--;
      return { ok: false, error: failure.error };
    }
    if (method === "apps.connections.open") {
      if (token !== this.appToken)
        return { ok: false, error: token?.startsWith("xoxb-") ? "not_allowed_token_type" : "invalid_auth" };
      const ticket = randomUUID();
      this.tickets.add(ticket);
      return { ok: true, url: `${this.baseUrl.replace(/^http/, "ws")}/link/?ticket=${ticket}` };
    }
    if (token !== this.botToken) {
      return { ok: false, error: token?.startsWith("xapp-") ? "not_allowed_token_type" : "invalid_auth" };
    }
    const str = (k: string) => (typeof p[k] === "string" ? p[k] : undefined);
    switch (method) {
      case "auth.test":
        return {
          ok: true,
          url: "https://fake.slack.com/",
          team: "Fake",
          user: "palaver",
          team_id: TEAM_ID,
          user_id: BOT_USER_ID,
          bot_id: BOT_ID,
        };
      case "chat.postMessage": {
        const channel = str("channel");
        if (!channel) return { ok: false, error: "channel_not_found" };
        const blocks = parseBlocks(p.blocks);
        if (blocks === "invalid") return { ok: false, error: "invalid_blocks" };
        if (!str("text") && !blocks?.length) return { ok: false, error: "no_text" };
        const ts = this.ts();
        const message: StoredMessage = { ts, bot_id: BOT_ID, user: BOT_USER_ID, text: str("text") };
        const thread = str("thread_ts");
        if (thread) message.thread_ts = thread;
        if (blocks?.length) message.blocks = withBlockIds(blocks);
        this.addMessage(channel, message);
        this.posts.push({ channel, ts });
        this.wrote(channel, ts, str("text") ?? "", "post");
        this.deliveries.push({
          channel,
          text: str("text") ?? "",
          ...(thread ? { thread_ts: thread } : {}),
        });
        return { ok: true, channel, ts, message: { type: "message", ...message } };
      }
      case "chat.update": {
        const channel = str("channel") ?? "";
        const message = this.message(channel, str("ts") ?? "");
        if (!message) return { ok: false, error: "message_not_found" };
        if (message.bot_id !== BOT_ID) return { ok: false, error: "cant_update_message" };
        const blocks = parseBlocks(p.blocks);
        if (blocks === "invalid") return { ok: false, error: "invalid_blocks" };
        // Slack keeps the blocks an update does not mention; an empty list removes them.
        if (!str("text") && !blocks?.length && !message.blocks?.length)
          return { ok: false, error: "no_text" };
        if (str("text") !== undefined) message.text = str("text");
        if (blocks) message.blocks = blocks.length ? withBlockIds(blocks) : undefined;
        message.edited = this.ts();
        this.wrote(channel, message.ts, message.text ?? "", "update");
        // No "not modified" error on Slack: the same content again is just another successful update.
        return {
          ok: true,
          channel,
          ts: message.ts,
          text: message.text ?? "",
          message: { type: "message", ...message },
        };
      }
      case "chat.postEphemeral": {
        const channel = str("channel");
        const user = str("user");
        if (!channel) return { ok: false, error: "channel_not_found" };
        if (!user) return { ok: false, error: "user_not_found" };
        if (!str("text") && !p.blocks) return { ok: false, error: "no_text" };
        const thread = str("thread_ts");
        this.ephemerals.push({
          channel,
          user,
          text: str("text") ?? "",
          ...(thread ? { thread_ts: thread } : {}),
        });
        return { ok: true, message_ts: this.ts() };
      }
      case "reactions.add": {
        const key = `${str("channel")}:${str("timestamp")}`;
        const set = this.reactions.get(key) ?? new Set<string>();
        const name = str("name") ?? "";
        if (set.has(name)) return { ok: false, error: "already_reacted" };
        set.add(name);
        this.reactions.set(key, set);
        return { ok: true };
      }
      case "reactions.remove": {
        const set = this.reactions.get(`${str("channel")}:${str("timestamp")}`);
        if (!set?.delete(str("name") ?? "")) return { ok: false, error: "no_reaction" };
        return { ok: true };
      }
      case "conversations.replies": {
        const ts = str("ts");
        const all = this.messages.get(str("channel") ?? "") ?? [];
        const thread = all.filter((m) => m.ts === ts || m.thread_ts === ts);
        if (thread.length === 0) return { ok: false, error: "thread_not_found" };
        return { ok: true, messages: thread, has_more: false };
      }
      case "conversations.info": {
        const id = str("channel") ?? "";
        return {
          ok: true,
          channel: {
            id,
            name: id.startsWith("D") ? undefined : "general",
            is_im: id.startsWith("D"),
            is_channel: id.startsWith("C"),
          },
        };
      }
      case "users.info": {
        const id = str("user") ?? "";
        const user = this.users.get(id);
        if (!user) return { ok: false, error: "user_not_found" };
        return {
          ok: true,
          user: {
            id,
            team_id: user.team_id ?? TEAM_ID,
            name: user.name,
            real_name: user.real_name,
            profile: {},
          },
        };
      }
      case "files.getUploadURLExternal": {
        const fileId = `F${this.nextId++}`;
        this.uploads.push({ fileId, filename: str("filename") ?? "", bytes: Buffer.alloc(0) });
        return { ok: true, upload_url: `${this.baseUrl}/upload/${fileId}`, file_id: fileId };
      }
      case "files.completeUploadExternal": {
        const files = JSON.parse(str("files") ?? "[]") as { id: string; title?: string }[];
        for (const f of files) {
          const upload = this.uploads.find((u) => u.fileId === f.id);
          if (!upload) return { ok: false, error: "file_not_found" };
          const channel = str("channel_id");
          const thread = str("thread_ts");
          if (channel) upload.channelId = channel;
          if (thread) upload.threadTs = thread;
        }
        return { ok: true, files: files.map((f) => ({ id: f.id, title: f.title })) };
      }
      default:
        return { ok: false, error: "unknown_method" };
    }
  }

  private serveFile(req: IncomingMessage, res: ServerResponse, url: URL): void {
    const id = /^\/files-pri\/[^-]+-([^/]+)\//.exec(url.pathname)?.[1] ?? "";
    this.downloads.push(id);
    const file = this.files.get(id);
    if (!file) {
      res.writeHead(404).end();
      return;
    }
    if (this.signInPageForFiles || req.headers.authorization !== `Bearer ${this.botToken}`) {
      // What Slack does without a token that may read files: a sign-in page, status 200.
      res
        .writeHead(200, { "content-type": "text/html" })
        .end("<!DOCTYPE html><html><body>Sign in</body></html>");
      return;
    }
    res
      .writeHead(200, { "content-type": file.mimetype, "content-length": file.bytes.length })
      .end(file.bytes);
  }

  private async transcribe(req: IncomingMessage, res: ServerResponse, body: Buffer): Promise<void> {
    const type = req.headers["content-type"] ?? "";
    const form = await new Response(body, { headers: { "content-type": type } }).formData();
    const file = form.get("file");
    if (!(file instanceof File)) {
      res.writeHead(400, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: "file is required", type: "invalid_request_error" } }));
      return;
    }
    const model = form.get("model");
    this.transcriptions.push({
      model: typeof model === "string" ? model : "",
      fileName: file.name,
      size: file.size,
    });
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ text: this.transcript }));
  }

  private async receiveUpload(
    req: IncomingMessage,
    res: ServerResponse,
    fileId: string,
    body: Buffer,
  ): Promise<void> {
    const upload = this.uploads.find((u) => u.fileId === fileId);
    if (!upload) {
      res.writeHead(404).end();
      return;
    }
    const type = req.headers["content-type"] ?? "";
    if (type.startsWith("multipart/form-data")) {
      const form = await new Response(body, { headers: { "content-type": type } }).formData();
      const part = [...form.values()][0];
      upload.bytes =
        part instanceof Blob ? Buffer.from(await part.arrayBuffer()) : Buffer.from(String(part ?? ""));
    } else {
      upload.bytes = body;
    }
    res.writeHead(200, { "content-type": "text/plain" }).end(`OK - ${body.length}`);
  }

  // ---------------------------------------------------------------------------

  private notify(): void {
    for (const waiter of [...this.waiters]) waiter();
  }

  private waitUntil(cond: () => boolean, timeoutMs: number, what: string): Promise<void> {
    if (cond()) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const check = () => {
        if (!cond()) return;
        cleanup();
        resolve();
      };
      // The limit only ends a hung test: never below MIN_WAIT_MS, for loaded machines.
      const limit = Math.max(timeoutMs, MIN_WAIT_MS);
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`fake Slack: waited ${limit} ms for ${what}`));
      }, limit);
      const cleanup = () => {
        clearTimeout(timer);
        this.waiters.delete(check);
      };
      this.waiters.add(check);
    });
  }

  /** Drops pending pushes, closes every socket and the server. */
  async close(): Promise<void> {
    for (const pending of [...this.queue.splice(0), ...this.inFlight.values()]) {
      clearTimeout(pending.timer);
      clearTimeout(pending.retryTimer);
      pending.reject(new Error("fake Slack closed"));
    }
    this.inFlight.clear();
    for (const ws of this.wss.clients) ws.terminate();
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A retry this close to the end of Retry-After is in time: timers and Date.now() round to the ms. */
const CLOCK_GRAIN_MS = 2;

/** What one rate limit covers: a Web API method, or for chat.update one message (Slack's edit limit). */
function limitPlace(method: string, params: Record<string, unknown>): string {
  return method === "chat.update" ? `${method}:${String(params.channel)}:${String(params.ts)}` : method;
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function parseParams(req: IncomingMessage, body: Buffer): Promise<Record<string, unknown>> {
  const type = req.headers["content-type"] ?? "";
  if (type.startsWith("application/json"))
    return JSON.parse(body.toString() || "{}") as Record<string, unknown>;
  if (type.startsWith("multipart/form-data")) {
    const form = await new Response(body, { headers: { "content-type": type } }).formData();
    const out: Record<string, unknown> = {};
    for (const [k, v] of form.entries()) out[k] = typeof v === "string" ? v : "[binary]";
    return out;
  }
  return Object.fromEntries(new URLSearchParams(body.toString()));
}

/** The buttons of a message's actions blocks. */
function buttons(message: StoredMessage | undefined): NonNullable<Block["elements"]> {
  return (message?.blocks ?? []).flatMap((b) =>
    b.type === "actions" ? (b.elements ?? []).filter((e) => e.type === "button") : [],
  );
}

/**
 * A `blocks` parameter (a JSON string in a form-encoded call, an array in a JSON one), checked
 * against the Block Kit limits Slack enforces with invalid_blocks; undefined when not given.
 */
function parseBlocks(raw: unknown): Block[] | "invalid" | undefined {
  if (raw === undefined) return undefined;
  let blocks: unknown;
  try {
    blocks = typeof raw === "string" ? JSON.parse(raw) : raw;
  } catch {
    return "invalid";
  }
  if (!Array.isArray(blocks) || blocks.length > 50) return "invalid";
  for (const block of blocks as Block[]) {
    if (block.type === "section" && (!block.text?.text || block.text.text.length > 3000)) return "invalid";
    if (block.type === "actions") {
      const elements = block.elements ?? [];
      if (elements.length === 0 || elements.length > 25) return "invalid";
      for (const e of elements) {
        if (e.type !== "button") continue;
        const label = e.text?.text ?? "";
        if (!label || label.length > 75 || (e.action_id ?? "").length > 255) return "invalid";
        if (e.style !== undefined && e.style !== "primary" && e.style !== "danger") return "invalid";
      }
    }
  }
  return blocks as Block[];
}

/** Slack gives every block without one a block_id. */
function withBlockIds(blocks: Block[]): Block[] {
  return blocks.map((b, i) => ({ ...b, block_id: b.block_id ?? `b${i}` }));
}

/** Headers Slack signs an HTTP request with (v0 HMAC-SHA256 of `v0:timestamp:body`). */
export function signSlackRequest(
  signingSecret: string,
  body: string,
  timestamp = Math.floor(Date.now() / 1000),
): Record<string, string> {
  const signature = createHmac("sha256", signingSecret).update(`v0:${timestamp}:${body}`).digest("hex");
  return { "x-slack-request-timestamp": String(timestamp), "x-slack-signature": `v0=${signature}` };
}

// ---------------------------------------------------------------------------
// Event builders

let eventTs = 1_800_000_000;
/** A unique message timestamp for test events. */
export function nextTs(): string {
  return `${eventTs++}.000200`;
}

/** A test event: any fields, with the ts and channel tests refer back to. */
export type TestEvent = Record<string, unknown> & { ts: string; channel: string };

export function dmEvent(text: string, extra: Record<string, unknown> = {}): TestEvent {
  return {
    type: "message",
    channel: "D1",
    channel_type: "im",
    user: "U1",
    text,
    ts: nextTs(),
    team: TEAM_ID,
    ...extra,
  };
}

export function channelMessage(text: string, extra: Record<string, unknown> = {}): TestEvent {
  return {
    type: "message",
    channel: "C1",
    channel_type: "channel",
    user: "U1",
    text,
    ts: nextTs(),
    team: TEAM_ID,
    ...extra,
  };
}

/** The `app_mention` Slack sends along with the `message` of a mention (same ts). */
export function mentionEvent(message: TestEvent): TestEvent {
  const { channel_type: _type, ...rest } = message;
  return { ...rest, type: "app_mention" };
}
