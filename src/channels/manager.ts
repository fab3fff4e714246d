/**
 * The channel manager: starts the enabled channels (a failing one is retried
 * with backoff while the others run), checks access for everything they
 * receive, routes replies from the bus to the channel that owns the chat
 * (in order per chat), and stops channels in reverse order.
 */
import type { MessageBus } from "../bus/bus.js";
import type { InboundMessage, OutboundMessage } from "../bus/types.js";
import { backoffDelay, sleep } from "../util/backoff.js";
import { JOURNAL_ID, type Journal, type PendingOutbound } from "../daemon/journal.js";
import { logger, redactText, type Logger } from "../log.js";
import { errorMessage } from "../util/errors.js";
import { isAllowed, NoticeLimiter, refusalNotice } from "./access.js";
import type { Channel, InboundReservation, InboundSink } from "./types.js";

export interface ChannelOptions {
  /** User ids allowed in; "*" for everybody, empty for nobody. */
  allowFrom: readonly string[];
  /** Override channels.sendProgress / sendToolHints for this channel (the terminal shows both). */
  sendProgress?: boolean;
  sendToolHints?: boolean;
}

export interface ChannelManagerOptions {
  bus: MessageBus;
  sendProgress: boolean;
  sendToolHints: boolean;
  log?: Logger;
  /** Backoff between start attempts of a failing channel. */
  retryBaseMs?: number;
  retryMaxMs?: number;
  notices?: NoticeLimiter;
  /** Durable inbox/outbox: admitted messages and final replies are journaled (see daemon/journal.ts). */
  journal?: Journal;
  /** How long a final reply that fails to send is retried before it is given up (default 10 min). */
  outboxRetryMs?: number;
  outboxRetryBaseMs?: number;
}

export type ChannelState = "stopped" | "starting" | "running" | "retrying";

interface Entry {
  channel: Channel;
  options: ChannelOptions;
  state: ChannelState;
  lastError?: string;
  /** The background start-and-retry task. */
  starting?: Promise<void>;
  /** Ends this channel's start retries (removal); the manager's lifetime ends everyone's. */
  stopRetrying?: AbortController;
}

export class ChannelManager {
  private readonly entries = new Map<string, Entry>();
  private readonly log: Logger;
  private readonly notices: NoticeLimiter;
  /** Per-chat tail of the send chain, so one chat's messages go out in order. */
  private readonly sending = new Map<string, Promise<void>>();
  private lifetime = new AbortController();
  private unsubscribe: (() => void) | null = null;
  private intakeOpen = false;

  constructor(private readonly opts: ChannelManagerOptions) {
    this.log = opts.log ?? logger("channels");
    this.notices = opts.notices ?? new NoticeLimiter();
  }

  add(channel: Channel, options: ChannelOptions): void {
    if (this.entries.has(channel.name)) throw new Error(`channel ${channel.name} added twice`);
    this.entries.set(channel.name, { channel, options, state: "stopped" });
  }

  get names(): string[] {
    return [...this.entries.keys()];
  }

  status(): { name: string; state: ChannelState; lastError?: string }[] {
    return [...this.entries.values()].map((e) => ({
      name: e.channel.name,
      state: e.state,
      ...(e.lastError ? { lastError: e.lastError } : {}),
    }));
  }

  /**
   * Starts routing and every channel. Resolves once each channel has either
   * started or failed its first attempt (and is retrying in the background).
   */
  async start(): Promise<void> {
    this.lifetime = new AbortController();
    this.intakeOpen = true;
    this.unsubscribe ??= this.opts.bus.onOutbound((msg) => this.route(msg));
    await Promise.all([...this.entries.values()].map((entry) => this.launch(entry)));
  }

  /** Starts one channel in the background; resolves after its first attempt. */
  private launch(entry: Entry): Promise<void> {
    return new Promise<void>((settled) => {
      entry.starting = this.keepStarting(entry, settled);
    });
  }

  /** Replaces (or adds) a channel while the others keep running: config reload. */
  async replace(channel: Channel, options: ChannelOptions): Promise<void> {
    await this.remove(channel.name);
    this.add(channel, options);
    const entry = this.entries.get(channel.name)!;
    if (!this.lifetime.signal.aborted && this.unsubscribe) await this.launch(entry);
  }

  /** Stops and forgets one channel (its queued replies stay in the journal). */
  async remove(name: string): Promise<void> {
    const entry = this.entries.get(name);
    if (!entry) return;
    this.entries.delete(name);
    entry.stopRetrying?.abort();
    await entry.starting;
    if (entry.state === "running")
      await entry.channel
        .stop()
        .catch((err: unknown) => this.log.warn({ err, channel: name }, "channel did not stop cleanly"));
    entry.state = "stopped";
  }

  /** Stops taking new messages (shutdown step one); replies still go out. */
  closeIntake(): void {
    this.intakeOpen = false;
  }

  /** Waits for queued sends (bounded), then stops channels in reverse order of adding. */
  async stop(flushTimeoutMs = 5000): Promise<void> {
    this.intakeOpen = false;
    await this.flush(flushTimeoutMs);
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.lifetime.abort();
    for (const entry of [...this.entries.values()].reverse()) {
      await entry.starting;
      if (entry.state === "stopped") continue;
      try {
        await entry.channel.stop();
      } catch (err) {
        this.log.warn({ err, channel: entry.channel.name }, "channel did not stop cleanly");
      }
      entry.state = "stopped";
    }
  }

  /** Resolves when every queued send has finished, or after timeoutMs. */
  async flush(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(this.sending.values()),
      new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs))),
    ]);
    clearTimeout(timer);
  }

  private async keepStarting(entry: Entry, firstAttemptSettled: () => void): Promise<void> {
    const name = entry.channel.name;
    entry.stopRetrying = new AbortController();
    const signal = AbortSignal.any([this.lifetime.signal, entry.stopRetrying.signal]);
    const gate: InboundSink = {
      allows: (msg) => isAllowed(msg, entry.options.allowFrom),
      publishInbound: (msg) => this.admit(entry, msg),
      reserve: (msg) => this.reserve(entry, msg),
    };
    for (let attempt = 0; !signal.aborted; attempt++) {
      entry.state = attempt === 0 ? "starting" : "retrying";
      try {
        await entry.channel.start(gate, signal);
        entry.state = "running";
        entry.lastError = undefined;
        this.log.info({ channel: name }, "channel started");
        firstAttemptSettled();
        return;
      } catch (err) {
        // Shown by /healthz and /status, which are not logs: an SDK error may quote a URL with the token.
        entry.lastError = redactText(errorMessage(err));
        const delayMs = backoffDelay(attempt, this.opts.retryBaseMs ?? 2000, this.opts.retryMaxMs ?? 300_000);
        this.log.error(
          { channel: name, err, retryInMs: Math.round(delayMs) },
          `channel ${name} failed to start`,
        );
        entry.state = "retrying";
        firstAttemptSettled();
        try {
          await sleep(delayMs, signal);
        } catch {
          break; // stopped while waiting
        }
      }
    }
    entry.state = "stopped";
  }

  private admit(entry: Entry, msg: InboundMessage): void {
    const name = entry.channel.name;
    if (!isAllowed(msg, entry.options.allowFrom)) {
      this.refuse(entry, msg);
      return;
    }
    const journal = this.opts.journal;
    const id = journal ? journal.recordInbound(msg) : undefined;
    if (id === null) {
      this.log.info(
        { channel: name, chatId: msg.chatId, messageId: msg.metadata?.messageId },
        "duplicate delivery ignored",
      );
      return;
    }
    this.publishAdmitted(entry, msg, id);
  }

  private publishAdmitted(entry: Entry, msg: InboundMessage, journalId: string | undefined): void {
    if (!this.intakeOpen) {
      // Journaled, so the next start answers it; without a journal it is lost, and we say so.
      this.log.warn(
        { channel: entry.channel.name, chatId: msg.chatId, kept: journalId !== undefined },
        "message arrived while shutting down",
      );
      return;
    }
    this.opts.bus.publishInbound(
      journalId ? { ...msg, metadata: { ...msg.metadata, [JOURNAL_ID]: journalId } } : msg,
    );
  }

  /**
   * Journals a message that is not complete yet (files downloading, queued
   * behind another): if palaver dies before it is published, the next start
   * answers the message as it was reserved. Publishing later replaces the entry.
   */
  private reserve(entry: Entry, reserved: InboundMessage): InboundReservation {
    const journal = this.opts.journal;
    if (!journal || !isAllowed(reserved, entry.options.allowFrom)) {
      return { publish: (msg) => this.admit(entry, msg), cancel: () => undefined };
    }
    // Journaled as given: the inbound path (inbound.ts) puts a note in place of files still downloading.
    const id = journal.recordInbound(reserved);
    return {
      publish: (msg) => {
        if (id === null) {
          this.log.info({ channel: entry.channel.name, chatId: msg.chatId }, "duplicate delivery ignored");
          return;
        }
        journal.updateInbound(id, msg);
        this.publishAdmitted(entry, msg, id);
      },
      cancel: () => {
        if (id !== null) journal.markDone(id);
      },
    };
  }

  private refuse(entry: Entry, msg: InboundMessage): void {
    const name = entry.channel.name;
    const notify = this.notices.shouldNotify(name, msg.senderId);
    this.log.warn(
      { channel: name, senderId: msg.senderId, chatId: msg.chatId, notified: notify },
      "refused sender",
    );
    if (notify) {
      this.enqueueSend(entry, {
        channel: name,
        chatId: msg.chatId,
        content: refusalNotice(name, msg.senderId),
        metadata: msg.metadata,
      });
    }
  }

  /** Sends the final replies an earlier run had not delivered (from the journal). */
  resend(pending: PendingOutbound[]): void {
    for (const { id, msg } of pending) {
      const entry = this.entries.get(msg.channel);
      if (entry) this.enqueueSend(entry, msg, id);
      else {
        // Kept pending, not dropped and not counted as sent: the channel may be enabled again
        // (a config slip, a token being rotated), and the next start with it delivers the reply.
        this.log.warn(
          { channel: msg.channel, chatId: msg.chatId },
          `undelivered reply for channel ${msg.channel}, which is not enabled; kept in the journal until it is`,
        );
      }
    }
  }

  private route(msg: OutboundMessage): void {
    const entry = this.entries.get(msg.channel);
    if (!entry) {
      // Replies to chats of channels that are not running here (the terminal's own bus, say).
      this.log.debug({ channel: msg.channel }, "no such channel for outbound message");
      return;
    }
    if (!wanted(msg, entry.options, this.opts)) return;
    // Final replies go through the outbox; progress and hints are worth nothing later.
    const outboxId = (msg.kind ?? "final") === "final" ? this.opts.journal?.recordOutbound(msg) : undefined;
    this.enqueueSend(entry, msg, outboxId);
  }

  private enqueueSend(entry: Entry, msg: OutboundMessage, outboxId?: string): void {
    const key = `${msg.channel}:${msg.chatId}`;
    const previous = this.sending.get(key) ?? Promise.resolve();
    const next = previous.then(() =>
      outboxId ? this.deliver(entry, msg, outboxId) : this.sendOne(entry, msg),
    );
    this.sending.set(key, next);
    void next.finally(() => {
      if (this.sending.get(key) === next) this.sending.delete(key);
    });
  }

  /**
   * Sends a journaled final reply, retrying with backoff for a bounded time
   * (the chat's later messages wait, so order is kept). Stopping the manager
   * ends the retries but leaves the reply in the journal for the next start.
   */
  private async deliver(entry: Entry, msg: OutboundMessage, outboxId: string): Promise<void> {
    const journal = this.opts.journal;
    const deadline = Date.now() + (this.opts.outboxRetryMs ?? 10 * 60_000);
    const signal = this.lifetime.signal;
    for (let attempt = 0; ; attempt++) {
      try {
        await entry.channel.send(msg);
        journal?.markSent(outboxId);
        return;
      } catch (err) {
        const delayMs = backoffDelay(attempt, this.opts.outboxRetryBaseMs ?? 1000, 60_000);
        if (Date.now() + delayMs > deadline) {
          this.log.error(
            { err, channel: msg.channel, chatId: msg.chatId },
            "reply could not be delivered; giving up",
          );
          journal?.markDropped(outboxId, errorMessage(err));
          return;
        }
        this.log.warn(
          { err, channel: msg.channel, chatId: msg.chatId, retryInMs: Math.round(delayMs) },
          "sending failed; will retry",
        );
        try {
          await sleep(delayMs, signal);
        } catch {
          return; // shutting down: the journal keeps it for the next start
        }
      }
    }
  }

  private async sendOne(entry: Entry, msg: OutboundMessage): Promise<void> {
    try {
      await entry.channel.send(msg);
    } catch (err) {
      this.log.error({ err, channel: msg.channel, chatId: msg.chatId, kind: msg.kind }, "sending failed");
    }
  }
}

/** Progress and tool hints go out only when configured (per channel, else globally). */
function wanted(msg: OutboundMessage, channel: ChannelOptions, global: ChannelManagerOptions): boolean {
  switch (msg.kind ?? "final") {
    case "final":
      return true;
    case "progress":
      return channel.sendProgress ?? global.sendProgress;
    case "toolHint":
      return channel.sendToolHints ?? global.sendToolHints;
  }
}
