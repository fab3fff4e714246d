/**
 * The Slack channel: the receiver (receiver.ts) brings messages in, the
 * shared inbound path gates, downloads (files.ts) and transcribes them, the
 * receipt reaction is the shared typing indicator, and every post, upload and
 * reaction goes out through one send point that turns Slack's failures into
 * ChannelErrors (errors.ts). Questions are Block Kit buttons; a press goes to
 * the sink's choose and its notice back to the presser alone (an ephemeral
 * message). A streamed reply is posted, updated and finalized in place
 * (preview.ts). What to take and how to write it is decided in mapping.ts,
 * format.ts and questions.ts.
 */
import { readFile } from "node:fs/promises";
import { Agent as HttpAgent } from "node:http";
import { Agent as HttpsAgent } from "node:https";
import type { AddressInfo } from "node:net";
import { basename } from "node:path";
import { webApi } from "@slack/bolt";
import { parseCommand } from "../../bus/commands.js";
import type { OutboundMessage, TurnEvent } from "../../bus/types.js";
import type { Logger } from "../../log.js";
import { sleep } from "../../util/backoff.js";
import { BoundedMap } from "../../util/bounded-map.js";
import { ChannelError, errorMessage } from "../../util/errors.js";
import { platformConnections } from "../../config/platforms/common.js";
import { InboundPath } from "../inbound.js";
import type { ChannelFactoryContext } from "../platform.js";
import { transcriberFor, type Transcriber } from "../transcription.js";
import type {
  Channel,
  ChoiceClick,
  InboundSink,
  PreviewSurface,
  PreviewTarget,
  SentMessage,
} from "../types.js";
import { TypingIndicator } from "../typing.js";
import { slackProblems, type SlackConfig } from "../../config/platforms/slack.js";
import { slackChannelError } from "./errors.js";
import { incomingFiles, type SlackFileOptions } from "./files.js";
import { slackLogger } from "./logger.js";
import { CHANNEL_NAME, threadTsOf, type MappedMessage, type SlackPolicy } from "./mapping.js";
import { formatSlackMessage } from "./format.js";
import { slackPreviewSurface } from "./preview.js";
import {
  editParts,
  noticeText,
  questionMessage,
  type QuestionMessage,
  type SlackPress,
} from "./questions.js";
import { SlackReceiver, type ReceiverTuning, type WebClient } from "./receiver.js";

type RetryOptions = NonNullable<webApi.WebClientOptions["retryConfig"]>;

/** Tuning the config does not expose; tests make it fast. */
export interface SlackTuning extends ReceiverTuning {
  /** Web API retries (network errors; reads also after a 429's Retry-After wait). */
  retryConfig?: RetryOptions;
  /** One attachment download. */
  downloadTimeoutMs?: number;
  /** The longest the receipt reaction stays on a message whose turn never ended (default 30 min). */
  typingMaxMs?: number;
}

export interface SlackChannelOptions extends SlackTuning {
  config: SlackConfig;
  workspace: string;
  maxMediaBytes: number;
  log: Logger;
  /** Audio clips become text through it; none: they are handed on as files. */
  transcriber?: Transcriber | null;
  /** Connections to the Web API at most, for every client (platformConnections); default: no limit. */
  maxConnections?: number;
}

/** The message a turn answers: the receipt reaction goes on it. */
interface ReceiptTarget {
  channel: string;
  ts: string;
  /** Whether reactions.add succeeded, so the end of the turn knows there is something to take off. */
  added: boolean;
}

const DEFAULT_RETRY: RetryOptions = {
  retries: 5,
  factor: 2,
  minTimeout: 1000,
  maxTimeout: 30_000,
  randomize: true,
};
/**
 * Inside a reply split into parts, a short rate limit after the first part is waited out here:
 * the outbox's retry would post the parts already out a second time.
 */
const MID_REPLY_WAIT_MS = 30_000;
const STOP_WAIT_MS = 5000;
/** Question ids → the ts of their message, for edits that do not name it. */
const REMEMBERED_QUESTIONS = 500;
const NO_DESK_NOTICE = "This can't be answered here.";

/** The registry's factory: `slack: async (ctx) => (await import("./slack/adapter.js")).createSlackChannel(ctx)`. */
export async function createSlackChannel(
  ctx: ChannelFactoryContext,
  tuning: SlackTuning = {},
): Promise<Channel> {
  const log = ctx.log.child({ channel: CHANNEL_NAME });
  return Promise.resolve(
    new SlackChannel({
      config: ctx.config.channels.slack,
      workspace: ctx.workspace,
      maxMediaBytes: ctx.config.channels.maxMediaBytes,
      log,
      transcriber: transcriberFor(ctx.config, log),
      maxConnections: platformConnections(ctx.config.agents.defaults),
      ...tuning,
    }),
  );
}

export class SlackChannel implements Channel {
  readonly name = CHANNEL_NAME;
  private readonly config: SlackConfig;
  private readonly log: Logger;
  private readonly apiUrl: string;
  private readonly receiver: SlackReceiver;
  private readonly typing: TypingIndicator<ReceiptTarget>;
  private readonly fileOptions: SlackFileOptions;
  private readonly questionRefs = new BoundedMap<string, string>(REMEMBERED_QUESTIONS);
  private sink: InboundSink | undefined;
  private inbound: InboundPath | undefined;
  private lifetime = new AbortController();

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
    // Bolt and its clients log through pino, the channel's secrets scrubbed from every line.
    const logger = slackLogger(this.log.child({ sdk: "bolt" }), [
      config.botToken,
      config.appToken,
      config.signingSecret,
    ]);
    const agent = connectionPool(this.apiUrl, opts.maxConnections);
    const clientOptions: webApi.WebClientOptions = {
      ...(this.apiUrl ? { slackApiUrl: this.apiUrl } : {}),
      logger,
      retryConfig: opts.retryConfig ?? DEFAULT_RETRY,
      timeout: opts.requestTimeoutMs ?? 30_000,
      ...(agent ? { agent } : {}),
    };
    const policy: SlackPolicy = {
      groupPolicy: config.groupPolicy,
      groupAllowFrom: config.groupAllowFrom,
      replyInThread: config.replyInThread,
      dmEnabled: config.dm?.enabled ?? true,
    };
    this.receiver = new SlackReceiver({
      tuning: opts,
      config,
      policy,
      apiUrl: this.apiUrl,
      reads: new webApi.WebClient(config.botToken, clientOptions),
      // The app's client (`app.client`) makes the posts, uploads and reactions: a rate limit rejects
      // at once (with Slack's Retry-After) instead of waiting inside the SDK, so the outbox retries
      // it later and other chats' replies go on.
      clientOptions: { ...clientOptions, rejectRateLimitedCalls: true },
      logger,
      log: this.log,
      onMessage: (msg) => this.take(msg),
      ackAfterHandOn: () => this.sink?.stored !== undefined,
      onChoice: (click, press) => this.choose(click, press),
    });
    this.fileOptions = {
      botToken: config.botToken,
      apiUrl: this.apiUrl,
      workspace: opts.workspace,
      maxMediaBytes: opts.maxMediaBytes,
      downloadTimeoutMs: opts.downloadTimeoutMs ?? 60_000,
      log: this.log,
    };
    this.typing = new TypingIndicator<ReceiptTarget>({
      // The receipt reaction is shown once and stays until the turn ends.
      intervalMs: 0,
      maxMs: opts.typingMaxMs ?? 30 * 60 * 1000,
      signal: (target) => this.addReceipt(target),
      stop: (target) => this.swapReceipt(target),
      log: this.log,
    });
  }

  /** HTTP mode: where the Events API server listens (port 0 in the config picks a free one). */
  get address(): AddressInfo | undefined {
    return this.receiver.address;
  }

  async start(sink: InboundSink, signal: AbortSignal): Promise<void> {
    if (this.receiver.running) return;
    this.sink = sink;
    this.lifetime = new AbortController();
    this.inbound = new InboundPath({
      signal: this.lifetime.signal,
      maxMediaBytes: this.opts.maxMediaBytes,
      transcriber: this.opts.transcriber ?? null,
      notify: async (msg, text) => {
        await this.post(msg.chatId, threadTsOf(msg), text);
      },
      log: this.log,
    });
    const bot = await this.receiver.start(signal);
    this.log.info(
      {
        mode: this.config.mode,
        botUserId: bot.userId,
        ...(this.receiver.address ? { port: this.receiver.address.port } : {}),
      },
      this.config.mode === "socket" ? "connected to Slack (Socket Mode)" : "listening for Slack events",
    );
  }

  async stop(): Promise<void> {
    this.lifetime.abort();
    this.typing.stopAll();
    await this.receiver.stop();
    await this.inbound?.settle(STOP_WAIT_MS);
  }

  /** turnStart puts the receipt reaction on the message the turn answers; its turnEnd swaps it. */
  onTurn(event: TurnEvent): void {
    if (!this.config.reactEmoji) return;
    const { chatId, replyTo } = event;
    if (event.kind === "turnStart" && !replyTo) return; // no message to react to (cron, heartbeat)
    this.typing.onTurn(event, `${chatId}:${replyTo}`, () => ({
      channel: chatId,
      ts: replyTo!,
      added: false,
    }));
  }

  /**
   * A streamed reply: posted where the final would go (its thread too), updated as it grows and
   * finalized in place. The receipt reaction ends once its first text shows: the reply itself
   * says the bot is at work from then on. None while the channel is not running.
   */
  previewSurface(target: PreviewTarget): PreviewSurface | undefined {
    if (!this.receiver.running) return undefined;
    const { chatId: channel, turnId } = target;
    const threadTs = threadTsOf(target);
    return slackPreviewSurface({
      post: async (text) => {
        const ts = await this.post(channel, threadTs, text);
        const thread = threadTs ?? ts;
        if (thread) this.receiver.noteBotThread(channel, thread);
        return ts;
      },
      update: async (ts, text) => {
        await this.call("chat.update", () => this.writes().chat.update({ channel, ts, text }));
      },
      visible: () => void this.typing.end(turnId),
    });
  }

  /**
   * The turn's plan (turn-plans.ts): a message of its own where the reply goes (its thread too),
   * updated in place with chat.update. The receipt reaction stays: the turn is still at work.
   */
  planSurface(target: PreviewTarget): PreviewSurface | undefined {
    if (!this.receiver.running) return undefined;
    const channel = target.chatId;
    const threadTs = threadTsOf(target);
    return slackPreviewSurface({
      post: (text) => this.post(channel, threadTs, text),
      update: async (ts, text) => {
        await this.call("chat.update", () => this.writes().chat.update({ channel, ts, text }));
      },
      visible: () => undefined,
    });
  }

  async send(msg: OutboundMessage): Promise<SentMessage | void> {
    if (msg.kind === "question" && msg.question)
      return this.ask(msg, questionMessage(msg.content, msg.question));
    if (msg.kind === "edit" && msg.edit) return this.edit(msg, msg.edit);
    return this.reply(msg);
  }

  private async reply(msg: OutboundMessage): Promise<void> {
    const channel = msg.chatId;
    const threadTs = threadTsOf(msg);
    const parts = formatSlackMessage(msg.content);
    for (const [i, text] of parts.entries()) {
      const ts = await (i === 0
        ? this.post(channel, threadTs, text)
        : this.postWaitingOutShortLimits(channel, threadTs, text));
      // Replies under the bot's messages are in a thread the bot is part of.
      const thread = threadTs ?? ts;
      if (thread) this.receiver.noteBotThread(channel, thread);
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
      await this.post(channel, threadTs, `Could not attach ${failed.join(", ")}.`).catch((err: unknown) =>
        this.log.warn({ err, channel }, "could not report the failed upload"),
      );
    }
  }

  // ---------------------------------------------------------------------------
  // Questions

  /** Posts the question with its buttons; its ts is the ref an edit names. */
  private async ask(msg: OutboundMessage, question: QuestionMessage): Promise<SentMessage | void> {
    const channel = msg.chatId;
    const threadTs = threadTsOf(msg);
    const ts = await this.post(channel, threadTs, question.text, question.blocks);
    if (!ts) return;
    this.receiver.noteBotThread(channel, threadTs ?? ts);
    this.questionRefs.set(msg.question!.id, ts);
    return { ref: ts };
  }

  /**
   * Rewrites a question's message and takes its buttons away (`blocks: []`). Slack has no "not
   * modified" error: the same text again simply succeeds. A message that is gone or past the
   * workspace's edit window fails for good (errors.ts), so the manager does not try again.
   */
  private async edit(msg: OutboundMessage, edit: NonNullable<OutboundMessage["edit"]>): Promise<void> {
    const ts = edit.ref ?? this.questionRefs.get(edit.questionId);
    // Not sent by this run and not named: the outcome is still worth telling, as a message of its own.
    if (!ts) return this.reply(msg);
    const channel = msg.chatId;
    const { text, rest } = editParts(msg.content);
    await this.call("chat.update", () => this.writes().chat.update({ channel, ts, text, blocks: [] }));
    const threadTs = threadTsOf(msg);
    for (const part of rest) await this.postWaitingOutShortLimits(channel, threadTs, part);
  }

  /** A press (acknowledged already): the desk decides, the presser alone sees what it says. */
  private async choose(click: ChoiceClick, press: SlackPress): Promise<void> {
    const outcome = this.sink?.choose?.(click) ?? { accepted: false, notice: NO_DESK_NOTICE };
    this.log.debug(
      {
        chatId: click.chatId,
        senderId: click.senderId,
        questionId: click.questionId,
        accepted: outcome.accepted,
      },
      "Slack button pressed",
    );
    const text = noticeText(outcome.notice);
    if (!text) return;
    const { chatId: channel, userId: user, threadTs } = press;
    try {
      await this.call("chat.postEphemeral", () =>
        this.writes().chat.postEphemeral({
          channel,
          user,
          text,
          ...(threadTs ? { thread_ts: threadTs } : {}),
        }),
      );
    } catch (err) {
      // Best effort: the press counted whatever the presser gets to see.
      this.log.warn({ err, channel, user }, "could not show the presser the outcome of their press");
    }
  }

  // ---------------------------------------------------------------------------
  // Receiving

  /** Hands the message on; resolves once it is stored beyond this process (cluster mode). */
  private async take(msg: MappedMessage): Promise<void> {
    const sink = this.sink;
    if (!sink || !this.inbound) return;
    const { files, note } = incomingFiles(msg.files, this.fileOptions);
    const inbound = note
      ? { ...msg.inbound, content: [msg.inbound.content, note].filter((s) => s !== "").join("\n") }
      : msg.inbound;
    this.inbound.take(sink, {
      conversation: msg.conversation,
      inbound,
      files,
      // /stop goes ahead of the chat's messages still downloading: it is meant for what runs now.
      urgent: parseCommand(inbound.content)?.name === "stop",
    });
    await sink.stored?.(inbound);
  }

  // ---------------------------------------------------------------------------
  // Sending: every Web API write goes through call()

  /** Posts one message (with blocks: a question); resolves with its ts. */
  private async post(
    channel: string,
    threadTs: string | undefined,
    text: string,
    blocks?: QuestionMessage["blocks"],
  ): Promise<string | undefined> {
    const res = await this.call("chat.postMessage", () =>
      this.writes().chat.postMessage({
        channel,
        text,
        ...(blocks ? { blocks } : {}),
        ...(threadTs ? { thread_ts: threadTs } : {}),
      }),
    );
    return res.ts;
  }

  private async postWaitingOutShortLimits(
    channel: string,
    threadTs: string | undefined,
    text: string,
  ): Promise<string | undefined> {
    try {
      return await this.post(channel, threadTs, text);
    } catch (err) {
      const wait = err instanceof ChannelError ? err.retryAfterMs : undefined;
      if (wait === undefined || wait > MID_REPLY_WAIT_MS) throw err;
      await sleep(wait, this.lifetime.signal);
      return this.post(channel, threadTs, text);
    }
  }

  private async upload(channel: string, threadTs: string | undefined, path: string): Promise<void> {
    const file = await readFile(path);
    const filename = basename(path);
    await this.call("files.uploadV2", () =>
      threadTs
        ? this.writes().files.uploadV2({ channel_id: channel, thread_ts: threadTs, file, filename })
        : this.writes().files.uploadV2({ channel_id: channel, file, filename }),
    );
  }

  private async addReceipt(target: ReceiptTarget): Promise<void> {
    const { channel, ts } = target;
    try {
      await this.call("reactions.add", () =>
        this.writes().reactions.add({ channel, timestamp: ts, name: this.config.reactEmoji }),
      );
    } catch (err) {
      // Still there from before a restart (the journal replayed the message): ours to swap all the same.
      if (!(err instanceof ChannelError && err.code === "already_reacted")) throw err;
    }
    target.added = true;
  }

  /** The turn ended: the receipt reaction becomes doneEmoji (or just goes, when that is ""). */
  private async swapReceipt(target: ReceiptTarget): Promise<void> {
    if (!target.added) return;
    const { channel, ts } = target;
    await this.call("reactions.remove", () =>
      this.writes().reactions.remove({ channel, timestamp: ts, name: this.config.reactEmoji }),
    );
    const done = this.config.doneEmoji;
    if (done) {
      await this.call("reactions.add", () =>
        this.writes().reactions.add({ channel, timestamp: ts, name: done }),
      );
    }
  }

  /** The app's client; writes before the first start fail like a Slack that cannot be reached. */
  private writes(): WebClient {
    const client = this.receiver.client;
    if (!client) throw new ChannelError("Slack is not connected yet", { platform: CHANNEL_NAME });
    return client;
  }

  /** The single send point: a Web API write whose failure becomes a ChannelError (errors.ts). */
  private async call<T>(method: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw slackChannelError(method, err);
    }
  }
}

// ---------------------------------------------------------------------------

/** The settings the channel cannot work without (config check reports the same problems). */
function checkConfig(config: SlackConfig): void {
  const problems = slackProblems(config);
  if (problems.length > 0) throw new ChannelError(problems.join("; "));
}

function normalizeApiUrl(url: string): string {
  const trimmed = url.trim();
  if (!trimmed) return "";
  return trimmed.endsWith("/") ? trimmed : `${trimmed}/`;
}

/**
 * One keep-alive pool for every Web API client of the channel, at most `maxSockets` connections
 * (a call beyond its bound waits for one); none: Node's global agent, unbounded. The agent must
 * speak the API base's protocol (http only for a loopback fake or a local proxy).
 */
function connectionPool(apiUrl: string, maxSockets: number | undefined): HttpAgent | undefined {
  if (maxSockets === undefined || !Number.isFinite(maxSockets)) return undefined;
  const options = { keepAlive: true, maxSockets };
  return apiUrl.startsWith("http:") ? new HttpAgent(options) : new HttpsAgent(options);
}
