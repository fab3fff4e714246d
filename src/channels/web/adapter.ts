/**
 * The web chat as a Channel: served by the gateway's own HTTP server (daemon/health.ts mounts the
 * handler while the channel runs). Messages from the page take the one inbound path (inbound.ts)
 * like any platform's: the gate, then the journal, uploads transcribed, in order per conversation; replies, turn events, questions and the streamed text go to the tabs watching that
 * conversation as server-sent events. A conversation `<id>` is the session `web:<id>`.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { resolve } from "node:path";
import type { InboundMessage, OutboundMessage, TurnEvent } from "../../bus/types.js";
import type { Logger } from "../../log.js";
import { ChannelError, errorMessage } from "../../util/errors.js";
import { settleWithin } from "../../util/timeout.js";
import type { ChannelFactoryContext, GatewayServices } from "../platform.js";
import { fileKindOf, InboundPath, type IncomingFile } from "../inbound.js";
import { transcriberFor } from "../transcription.js";
import type { Channel, InboundSink, PreviewSurface, PreviewTarget, SentMessage } from "../types.js";
import { loadToken, WebAuth } from "./auth.js";
import { WEB_SENDER_ID, type WebConfig } from "../../config/platforms/web.js";
import { EventHub } from "./events.js";
import { HttpError } from "../../util/http-body.js";
import { isInside } from "../../workspace/paths.js";
import { isLoopbackName } from "./http.js";
import { historyOf, listConversations, NEW_CHAT_TITLE, sessionKeyOf, titleOf } from "./history.js";
import { LiveState } from "./live.js";
import type {
  ChooseResult,
  ConversationSummary,
  HistoryMessage,
  Me,
  SendAccepted,
  SendRequest,
  UsageView,
} from "./protocol.js";
import { ClientLimits, RateLimit } from "./rate.js";
import type { PublishedEvent, RelayedEvent } from "./relay.js";
import { createWebHandler, type WebApp } from "./routes.js";
import { StaticAssets } from "./static.js";
import { AgentFiles, Uploads, type Upload } from "./uploads.js";
import { usageViewOf } from "./usage.js";
import { BoundedMap } from "../../util/bounded-map.js";

/** Longest message text accepted from the page. */
export const MESSAGE_CHARS = 32_000;
/** New conversations and messages per minute: guard rails, far above what a person types. */
const CONVERSATIONS_PER_MINUTE = 30;
const MESSAGES_PER_MINUTE = 60;
/** Wrong tokens one client may try a minute, at login and as Bearer headers together. */
const TOKEN_FAILURES_PER_MINUTE = 10;
/** How long stop() waits for messages still being transcribed; the journal answers the rest after a restart. */
const STOP_TIMEOUT_MS = 2000;
/** Cluster mode: the longest a message's answer waits for it to be stored in the turn queue. */
const STORE_WAIT_MS = 2000;

export interface WebChannelOptions {
  /** Where the page's built files are (default dist/web/). */
  webRoot?: string;
  /** Cluster mode: the longest a message's 202 waits for it to be stored (default STORE_WAIT_MS). */
  storeWaitMs?: number;
}

export function createWebChannel(ctx: ChannelFactoryContext, opts: WebChannelOptions = {}): Promise<Channel> {
  if (!ctx.gateway) {
    throw new Error("the web chat is served by the gateway: start it with `palaver gateway` (npm start)");
  }
  return Promise.resolve(new WebChannel(ctx, ctx.gateway, opts));
}

class WebChannel implements Channel, WebApp {
  readonly name = "web";
  private readonly section: WebConfig;
  private readonly log: Logger;
  private readonly live = new LiveState();
  private readonly files = new AgentFiles();
  private readonly uploads: Uploads;
  private readonly assets: StaticAssets;
  /** Conversations of this run that may have no session file yet ("New chat", a first turn running). */
  private readonly recent = new BoundedMap<string, { title: string; updatedAt: string }>(100, 24 * 3600_000);
  private readonly newConversations = new RateLimit(CONVERSATIONS_PER_MINUTE, 60_000);
  private readonly messages = new RateLimit(MESSAGES_PER_MINUTE, 60_000);
  /** Refs of this run's previews start with it, so a preview of an earlier run is left alone. */
  private readonly runId = randomBytes(4).toString("hex");
  private hub: EventHub | null = null;
  private sink: InboundSink | null = null;
  private path: InboundPath | null = null;
  private lifetime = new AbortController();
  private unmount: (() => void) | null = null;
  private readonly storeWaitMs: number;

  constructor(
    private readonly ctx: ChannelFactoryContext,
    private readonly gateway: GatewayServices,
    opts: WebChannelOptions,
  ) {
    this.section = ctx.config.channels.web;
    this.log = ctx.log.child({ channel: "web" });
    this.uploads = new Uploads(ctx.workspace, {
      maxBytes: ctx.config.channels.maxMediaBytes,
      quotaBytes: this.section.uploadQuotaBytes,
      log: this.log,
    });
    this.assets = new StaticAssets(opts.webRoot);
    this.storeWaitMs = opts.storeWaitMs ?? STORE_WAIT_MS;
  }

  async start(sink: InboundSink): Promise<void> {
    const { http, stateDir } = this.gateway;
    const base = http.url;
    if (!base) {
      throw new ChannelError(
        "the gateway's HTTP server is not listening (is gateway.port in use?), so the chat page cannot be served",
        { platform: "web" },
      );
    }
    const { token, file } = await loadToken(this.section.token, stateDir, this.gateway.webToken);
    const hub = new EventHub();
    const loopbackOnly = isLoopbackName(http.host);
    this.hub = hub;
    this.sink = sink;
    this.lifetime = new AbortController();
    this.path = new InboundPath({
      signal: this.lifetime.signal,
      maxMediaBytes: this.ctx.config.channels.maxMediaBytes,
      transcriber: transcriberFor(this.ctx.config, this.log),
      notify: (msg, text) => {
        this.publish({ type: "final", conversationId: msg.chatId, text });
        return Promise.resolve();
      },
      log: this.log,
    });
    this.unmount = http.mount(
      createWebHandler({
        app: this,
        auth: new WebAuth(token),
        assets: this.assets,
        hub,
        live: this.live,
        uploads: this.uploads,
        files: this.files,
        failures: new ClientLimits(TOKEN_FAILURES_PER_MINUTE, 60_000),
        uploadRate: new ClientLimits(this.section.uploadsPerMinute, 60_000),
        loopbackOnly,
        trustProxy: this.section.trustProxy,
      }),
    );
    this.uploads.start();
    if (!loopbackOnly) {
      this.log.warn(
        { host: http.host },
        `gateway.host is ${http.host}: the chat page is reachable from other machines over plain HTTP; ` +
          "put a reverse proxy with TLS in front of it (docs/web.md)",
      );
    }
    await this.startRelay();
    const url = `${pageUrl(base, http.host)}/`;
    // One line, nothing else (pretty logs would print fields on lines of their own). A configured
    // token is a registered secret the log would mask: the line says where it is instead.
    this.log.info(
      file
        ? `Chat with palaver at ${url}#token=${token}`
        : `Chat with palaver at ${url} (token: channels.web.token)`,
    );
  }

  async stop(): Promise<void> {
    this.gateway.webRelay?.stop();
    this.unmount?.();
    this.unmount = null;
    this.hub?.close();
    this.hub = null;
    this.lifetime.abort();
    await this.path?.settle(STOP_TIMEOUT_MS);
    this.path = null;
    this.sink = null;
    await this.uploads.stop();
  }

  async send(msg: OutboundMessage): Promise<SentMessage | void> {
    const conversationId = msg.chatId;
    const turn = msg.turnId ? { turnId: msg.turnId } : {};
    switch (msg.kind ?? "final") {
      case "final": {
        const media = msg.media ?? [];
        const files = await Promise.all(media.map((path) => this.files.register(path)));
        this.publish(
          {
            type: "final",
            conversationId,
            ...turn,
            text: msg.content,
            ...(files.length ? { files } : {}),
          },
          files.length ? { files: Object.fromEntries(files.map((f, i) => [f.id!, media[i]!])) } : {},
        );
        return;
      }
      case "plan":
        // A plan of no turn (planSurface takes the turns' plans) is a note like progress.
        this.publish({ type: "progress", conversationId, ...turn, text: msg.content });
        return;
      case "progress":
      case "toolHint":
      case "delta":
        this.publish({
          type: msg.kind === "toolHint" ? "toolHint" : msg.kind === "delta" ? "delta" : "progress",
          conversationId,
          ...turn,
          text: msg.content,
        });
        return;
      case "question": {
        const question = msg.question;
        if (!question)
          throw new ChannelError("a question without choices", { platform: "web", permanent: true });
        this.publish({
          type: "question",
          conversationId,
          ...turn,
          questionId: question.id,
          text: msg.content,
          choices: question.choices.map((c) => ({
            id: c.id,
            label: c.label,
            ...(c.style ? { style: c.style } : {}),
          })),
        });
        return { ref: question.id };
      }
      case "edit":
        if (msg.edit) {
          this.publish({
            type: "questionClosed",
            conversationId,
            questionId: msg.edit.questionId,
            text: msg.content,
          });
        }
        return;
    }
  }

  onTurn(event: TurnEvent): void {
    const base = { conversationId: event.chatId, turnId: event.turnId };
    if (event.kind === "turnStart")
      this.publish({ type: "turnStart", ...base }, { background: event.background === true });
    else this.publish({ type: "turnEnd", ...base, outcome: event.outcome ?? "done" });
  }

  /**
   * Deltas go to the tabs as they come (a short interval: the first words show at once). The
   * final is not written over the preview here: it is refused, so the manager sends it through
   * send() as a `final` event (and the text before tool calls as `progress`), which the page
   * needs to know the reply is complete.
   */
  previewSurface(target: PreviewTarget): PreviewSurface {
    const ref = `${this.runId}:${target.turnId}`;
    const delta = (text: string) =>
      this.publish({ type: "delta", conversationId: target.chatId, turnId: target.turnId, text });
    return {
      maxChars: 1_000_000,
      intervalMs: 100,
      finalInPlace: false,
      post: (text) => {
        delta(text);
        return Promise.resolve(ref);
      },
      edit: (at, text) => {
        if (at === ref) delta(text);
        return Promise.resolve();
      },
      finalParts: (content) => [content],
      // The page marks a stopped turn itself (turnEnd "stopped").
      stopped: () => Promise.resolve(),
    };
  }

  /** The turn's plan (turn-plans.ts): `plan` events, which the page shows as one checklist, in place. */
  planSurface(target: PreviewTarget): PreviewSurface {
    const ref = `${this.runId}:plan:${target.turnId}`;
    const plan = (text: string) =>
      this.publish({ type: "plan", conversationId: target.chatId, turnId: target.turnId, text });
    return {
      maxChars: 1_000_000,
      intervalMs: 100,
      post: (text) => {
        plan(text);
        return Promise.resolve(ref);
      },
      edit: (at, text) => {
        if (at === ref) plan(text);
        return Promise.resolve();
      },
      finalParts: (content) => [content],
    };
  }

  // ---- what the routes ask (routes.ts) ----

  usage(conversationId: string): UsageView {
    // The page's sender is WEB_SENDER_ID: an owner while channels.web.allowFrom or admins name it.
    const report = this.gateway.usageReport(
      { channel: this.name, senderId: WEB_SENDER_ID },
      sessionKeyOf(conversationId),
    );
    return usageViewOf(report);
  }

  me(): Me {
    return {
      name: "palaver",
      model: this.gateway.model,
      limits: { messageChars: MESSAGE_CHARS, uploadBytes: this.uploads.maxBytes },
    };
  }

  async conversations(): Promise<ConversationSummary[]> {
    const listed = await listConversations(await this.gateway.sessions.list(), (id) => this.live.busy(id));
    const known = new Set(listed.map((c) => c.id));
    const fresh: ConversationSummary[] = [];
    for (const id of [...this.recent.keys()].reverse()) {
      const seen = this.recent.get(id);
      if (seen && !known.has(id)) fresh.push({ id, ...seen, busy: this.live.busy(id) });
    }
    return [...fresh, ...listed];
  }

  createConversation(): ConversationSummary {
    this.takeNewConversation();
    const id = randomId();
    const at = new Date().toISOString();
    this.recent.set(id, { title: NEW_CHAT_TITLE, updatedAt: at });
    return { id, title: NEW_CHAT_TITLE, updatedAt: at, busy: false };
  }

  async history(conversationId: string): Promise<HistoryMessage[]> {
    const key = sessionKeyOf(conversationId);
    const session = await this.gateway.sessions.get(key);
    // The consolidated messages memory let go of come back from storage, in front of the rest.
    return historyOf([...(await this.gateway.sessions.earlierMessages(session)), ...session.messages]);
  }

  async sendMessage(conversationId: string, request: SendRequest): Promise<SendAccepted> {
    const text = request.text.trim();
    if (text.length > MESSAGE_CHARS) {
      throw new HttpError(
        413,
        `a message is at most ${MESSAGE_CHARS} characters; attach longer text as a file`,
      );
    }
    if (text === "" && !request.uploads?.length) throw new HttpError(400, "the message is empty");
    // Posting to a fresh id starts a conversation as surely as POST /api/conversations does.
    if (!(await this.isKnown(conversationId))) this.takeNewConversation();
    const { sink, path } = this.running();
    if (!this.messages.take()) throw new HttpError(429, `at most ${MESSAGES_PER_MINUTE} messages a minute`);
    const messageId = randomUUID();
    const ids = request.uploads ?? [];
    const inbound = this.inbound(conversationId, text, messageId);
    const admitted = path.take(sink, {
      conversation: conversationId,
      inbound,
      files: this.uploads.find(ids).map((upload) => incomingUpload(upload, this.uploads)),
    });
    // Refused: the manager told the chat why (its refusal notice); the uploads wait for their time.
    if (!admitted) throw new HttpError(403, `channels.web.allowFrom does not let "${WEB_SENDER_ID}" in`);
    const { files } = this.uploads.take(ids);
    this.publish({ type: "user", conversationId, messageId, text, ...(files.length ? { files } : {}) });
    // Cluster mode: answered once the message is stored in the turn queue, so an instance killed
    // right after the 202 loses nothing. Bounded: a slow database must not hold the page, and
    // answering then loses nothing either, as the message is in this instance's journal and goes
    // into the queue when the database takes it.
    if (sink.stored) await settleWithin(sink.stored(inbound), this.storeWaitMs);
    return { messageId };
  }

  stopTurn(conversationId: string): void {
    const { sink, path } = this.running();
    const inbound = this.inbound(conversationId, "/stop", randomUUID());
    if (!path.take(sink, { conversation: conversationId, inbound, files: [], urgent: true }))
      throw new HttpError(403, `channels.web.allowFrom does not let "${WEB_SENDER_ID}" in`);
  }

  choose(questionId: string, choiceId: string): ChooseResult {
    const { sink } = this.running();
    const chatId = this.live.conversationOfQuestion(questionId);
    if (!chatId || !sink.choose) return { accepted: false, notice: "This question is no longer open." };
    return sink.choose({ channel: this.name, chatId, senderId: WEB_SENDER_ID, questionId, choiceId });
  }

  private takeNewConversation(): void {
    if (!this.newConversations.take()) {
      throw new HttpError(429, `at most ${CONVERSATIONS_PER_MINUTE} new conversations a minute`);
    }
  }

  /** A conversation of this run, or one with a session file. */
  private async isKnown(conversationId: string): Promise<boolean> {
    return (
      this.recent.has(conversationId) || (await this.gateway.sessions.hasChat(this.name, conversationId))
    );
  }

  private inbound(chatId: string, content: string, messageId: string): InboundMessage {
    return { channel: this.name, senderId: WEB_SENDER_ID, chatId, content, messageId };
  }

  private running(): { sink: InboundSink; path: InboundPath } {
    if (!this.sink || !this.path) throw new HttpError(503, "the web chat is stopping");
    return { sink: this.sink, path: this.path };
  }

  /** To this instance's tabs, and through the relay to the other instances' (cluster mode). */
  private publish(event: PublishedEvent, extra: Partial<Omit<RelayedEvent, "event">> = {}): void {
    const relayed: RelayedEvent = { event, background: false, ...extra };
    this.push(relayed);
    this.gateway.webRelay?.publish(relayed);
  }

  private push({ event, background, files }: RelayedEvent, remote = false): void {
    // Every instance lists the conversation (a tab may ask another one for the list).
    if (event.type === "user") this.noteRecent(event.conversationId, event.text);
    for (const ref of event.type === "final" ? (event.files ?? []) : []) {
      const path = ref.id ? files?.[ref.id] : undefined;
      // Only the shared workspace is the same file on every instance; nothing else is served for another.
      if (path && isInside(resolve(path), resolve(this.ctx.workspace))) this.files.adopt(ref, path);
    }
    this.live.see(event, background, remote);
    try {
      this.hub?.publish(event);
    } catch (err) {
      this.log.warn({ err: errorMessage(err) }, "an event could not be written to a tab");
    }
  }

  /** A message in a conversation that may have no session yet: the list shows it, titled by its first message. */
  private noteRecent(conversationId: string, text: string): void {
    const title = this.recent.get(conversationId)?.title;
    this.recent.set(conversationId, {
      title: title && title !== NEW_CHAT_TITLE ? title : titleOf(text),
      updatedAt: new Date().toISOString(),
    });
  }

  /**
   * Cluster mode: the events of turns running on other instances reach the tabs held here. When
   * the relay lost events, the turns running elsewhere are forgotten (their end may be among the
   * lost) and the streams end: the pages reconnect and reload the history.
   */
  private async startRelay(): Promise<void> {
    const relay = this.gateway.webRelay;
    if (!relay) return;
    try {
      await relay.start({
        deliver: (relayed) => {
          if (this.hub) this.push(relayed, true);
        },
        resync: () => {
          this.live.forgetRemoteTurns();
          this.hub?.endAll();
        },
      });
    } catch (err) {
      // The relay keeps trying on its own; this instance's tabs work meanwhile.
      this.log.warn(
        { err: errorMessage(err) },
        "web relay: not listening yet; turns on other instances stay unseen here until it is",
      );
    }
  }
}

/** An upload a message lists, for the inbound path: already in the media folder, so nothing to fetch. */
/** An upload as the inbound path takes files: "fetching" it moves it into its conversation's folder. */
function incomingUpload(upload: Upload, uploads: Uploads): IncomingFile {
  return {
    ...fileKindOf(upload.contentType),
    name: upload.name,
    sizeBytes: upload.bytes,
    fetch: (_signal, chat) => Promise.resolve(uploads.moveToConversation(upload, chat.chatId)),
  };
}

/** A conversation id: 12 of [a-z0-9]. */
function randomId(): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  return [...randomBytes(12)].map((b) => alphabet[b % alphabet.length]).join("");
}

/** The address to print: a wildcard bind is reached as 127.0.0.1 on this machine. */
function pageUrl(base: string, host: string): string {
  if (host === "0.0.0.0" || host === "::" || host === "") return base.replace(/\/\/[^/]+:/, "//127.0.0.1:");
  return base;
}
