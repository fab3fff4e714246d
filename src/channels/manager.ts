/**
 * The channel manager: starts the enabled channels (roster.ts: a failing one is retried with
 * backoff while the others run), hands each the inbound gate for what it receives (access, journal,
 * bus: inbound-gate.ts), forwards turn events to the channel of the turn's chat, routes replies from
 * the bus to the channel that owns the chat (in order per chat; one chat's failing sends never
 * hold back another's), keeps replies for a channel that is not running until it runs, and stops
 * channels in reverse order.
 */
import type { MessageBus } from "../bus/bus.js";
import type { InboundMessage, OutboundMessage, TurnEvent } from "../bus/types.js";
import { replyPlaceOf } from "../bus/types.js";
import { sleep } from "../util/backoff.js";
import type { Journal, OpenPreview, PendingOutbound } from "../daemon/journal.js";
import { logger, type Logger } from "../log.js";
import { KeyedQueue } from "../util/keyed-queue.js";
import { settleWithin } from "../util/timeout.js";
import { ALLOW_FROM_ONLY, NoticeLimiter, type AccessPolicy } from "./access.js";
import { classifySendFailure, failureFields } from "./delivery.js";
import { HeldReplies } from "./held-replies.js";
import { InboundGate } from "./inbound-gate.js";
import { LivePreview } from "./live-preview.js";
import { InterruptedPreviews } from "./interrupted-previews.js";
import { journaledPreview, TurnPreviews } from "./turn-previews.js";
import { TurnFinals, type FinalPlace, type SentOnce } from "./sent-once.js";
import { TurnPlans } from "./turn-plans.js";
import { ChannelRoster, type ChannelOptions, type ChannelState, type RosterEntry } from "./roster.js";
import type { Channel, PreviewSurface, PreviewTarget, QuestionDesk } from "./types.js";

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
  /** Replies kept per channel while it is not running; past it the oldest is dropped (default 1000). */
  maxHeldPerChannel?: number;
  /** Counts what was delivered and what could not be (/metrics). */
  meter?: DeliveryMeter;
  /** Answers button presses and learns where question messages went (approvals); none: presses are refused. */
  questions?: QuestionDesk;
  /** Show replies while they are written, where the channel can (default false). */
  streaming?: boolean;
  /** Who besides allowFrom is let in (pairing); none: allowFrom alone. */
  access?: AccessPolicy;
  /** At most one preview update per this many ms per reply (default 1000). */
  streamIntervalMs?: number;
  /** Cluster mode: a turn's final replies go out once in the cluster, even when another instance runs the turn again. */
  sentOnce?: SentOnce;
  /** Cluster mode: resolves once what the channels published is stored in the cluster (InboundSink.stored). */
  stored?: (msg?: InboundMessage) => Promise<void>;
}

/** Why a message was not delivered: the platform refused it for good, retries ran out, it was sent once and failed, or too many waited for a stopped channel. */
export type UndeliveredReason = "permanent" | "gave_up" | "failed_once" | "overflow";

export interface DeliveryMeter {
  delivered(msg: OutboundMessage): void;
  failed(msg: OutboundMessage, reason: UndeliveredReason): void;
}

/** A reply on its way: the message and its outbox entry, when journaled. */
interface Pending {
  msg: OutboundMessage;
  outboxId?: string;
  /** The live preview this message replaces (a streamed turn's final or progress text). */
  preview?: LivePreview;
  /** Its place among its turn's final replies, when they are sent once in the cluster. */
  once?: FinalPlace;
  /** This instance claimed it in the cluster's outbox (a retry, or a send held while the channel was down, does not claim again). */
  claimed?: boolean;
}

export class ChannelManager {
  private readonly roster: ChannelRoster;
  private readonly log: Logger;
  /** Access, journal and bus for what the channels receive. */
  private readonly gate: InboundGate;
  /** Sends per chat, so one chat's messages go out in order while other chats go on. */
  private readonly sends = new KeyedQueue();
  /** Final replies for channels that are not running, until they run. */
  private readonly held: HeldReplies<Pending>;
  private readonly previews = new TurnPreviews();
  /** Each running turn's checklist message (todo_write's plan). */
  private readonly plans = new TurnPlans();
  /** Cluster mode: each turn's final replies, numbered and sent once (sent-once.ts). */
  private readonly finals: TurnFinals | undefined;
  /** Previews a crash left open, marked interrupted once their channel runs. */
  private readonly interrupted: InterruptedPreviews;
  /** Ends the waits between a reply's send attempts (stop). */
  private lifetime = new AbortController();
  private unsubscribe: (() => void) | null = null;
  private intakeOpen = false;

  constructor(private readonly opts: ChannelManagerOptions) {
    this.log = opts.log ?? logger("channels");
    this.finals = opts.sentOnce ? new TurnFinals(opts.sentOnce, this.log) : undefined;
    this.gate = new InboundGate({
      bus: opts.bus,
      access: opts.access ?? ALLOW_FROM_ONLY,
      notices: opts.notices ?? new NoticeLimiter(),
      log: this.log,
      ...(opts.journal ? { journal: opts.journal } : {}),
      ...(opts.questions ? { questions: opts.questions } : {}),
      intakeOpen: () => this.intakeOpen,
      ...(opts.stored ? { stored: opts.stored } : {}),
      notify: (msg) => this.enqueue({ msg }),
    });
    this.roster = new ChannelRoster({
      log: this.log,
      ...(opts.retryBaseMs !== undefined ? { retryBaseMs: opts.retryBaseMs } : {}),
      ...(opts.retryMaxMs !== undefined ? { retryMaxMs: opts.retryMaxMs } : {}),
      sinkFor: (name, allowFrom) => this.gate.sinkFor(name, allowFrom),
      onRunning: (channel) => {
        this.releaseHeld(channel.name);
        this.interrupted.started(channel);
      },
    });
    this.held = new HeldReplies(opts.maxHeldPerChannel ?? 1000);
    this.interrupted = new InterruptedPreviews({
      ...(opts.journal ? { journal: opts.journal } : {}),
      log: this.log,
      inChatOrder: (chat, work) => this.inChatOrder(chat, work),
    });
  }

  add(channel: Channel, options: ChannelOptions): void {
    this.roster.add(channel, options);
  }

  get names(): string[] {
    return this.roster.names;
  }

  status(): { name: string; state: ChannelState; lastError?: string }[] {
    return this.roster.status();
  }

  /**
   * Starts routing and every channel. Resolves once each channel has either
   * started or failed its first attempt (and is retrying in the background).
   */
  async start(): Promise<void> {
    this.lifetime = new AbortController();
    this.intakeOpen = true;
    if (!this.unsubscribe) {
      const offOutbound = this.opts.bus.onOutbound((msg) => this.route(msg));
      const offTurn = this.opts.bus.onTurn((event) => this.forwardTurn(event));
      this.unsubscribe = () => {
        offOutbound();
        offTurn();
      };
    }
    await this.roster.startAll();
  }

  /**
   * Adds a channel and, once the manager has started, starts it too: resolves after its first
   * attempt. The gateway adds each platform this way as soon as its SDK has loaded.
   */
  join(channel: Channel, options: ChannelOptions): Promise<void> {
    return this.roster.join(channel, options);
  }

  /** Replaces (or adds) a channel while the others keep running: config reload. */
  replace(channel: Channel, options: ChannelOptions): Promise<void> {
    return this.roster.replace(channel, options);
  }

  /** Stops and forgets one channel; replies for it are kept until a channel of that name runs again. */
  remove(name: string): Promise<void> {
    return this.roster.remove(name);
  }

  /** Gives up connecting (a stop during start): channels still starting are aborted and not retried. */
  abortStarts(): void {
    this.roster.abortStarts();
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
    await this.roster.stopAll();
  }

  /** Resolves when every queued send has finished, or after timeoutMs. */
  async flush(timeoutMs: number): Promise<void> {
    await settleWithin(this.sends.idle(), timeoutMs);
  }

  /**
   * Resolves once what is queued for one chat has gone out (or failed for good, or is held for a
   * channel that is not running), or after timeoutMs. Cluster mode waits on it before a turn's
   * job completes (cluster/turns.ts).
   */
  async sentTo(channel: string, chatId: string, timeoutMs: number): Promise<void> {
    await settleWithin(this.sends.idleFor(chatKey({ channel, chatId })), timeoutMs);
  }

  /** Replies kept for a channel that is not running (status, tests). */
  heldFor(name: string): number {
    return this.held.count(name);
  }

  /** Replies kept per channel that is not running, less those `palaver outbox drop` dropped (/status). */
  heldCounts(): Record<string, number> {
    this.forgetDroppedHeld();
    return this.held.counts();
  }

  /** Whether a journaled reply was dropped (by `palaver outbox drop`) since it was queued. */
  private droppedMeanwhile(pending: Pending): boolean {
    const journal = this.opts.journal;
    return pending.outboxId !== undefined && journal !== undefined && !journal.isPendingOut(pending.outboxId);
  }

  /** Re-reads the journal for replies dropped from outside and forgets the held ones among them. */
  private forgetDroppedHeld(): void {
    this.opts.journal?.syncExternalDrops();
    const gone = this.held.discard((pending) => this.droppedMeanwhile(pending));
    for (const { msg } of gone) {
      this.log.info(
        { channel: msg.channel, chatId: msg.chatId },
        "held reply dropped by `palaver outbox drop`; not sent",
      );
    }
  }

  /**
   * Sends the final replies an earlier run had not delivered (from the journal). Those for a channel
   * that is not running are kept until it runs.
   */
  resend(pending: PendingOutbound[]): void {
    for (const { id, msg } of pending) this.enqueue({ msg, outboxId: id });
  }

  /**
   * Marks the previews an earlier run left on screen (a crash mid-stream) as interrupted, each once;
   * their answers come again with the replayed messages (channels/interrupted-previews.ts).
   */
  interruptPreviews(open: readonly OpenPreview[]): void {
    this.interrupted.mark(open, (name) => {
      if (!this.roster.get(name)) return undefined;
      return this.roster.running(name)?.channel ?? "later";
    });
  }

  /** A turn started or ended in one of a running channel's chats: its typing indicator, reactions. */
  private forwardTurn(event: TurnEvent): void {
    if (event.kind === "turnEnd") {
      this.closePreview(event);
      this.finishPlan(event);
      this.finals?.turnEnded(event.turnId);
    }
    const entry = this.roster.running(event.channel);
    if (!entry?.channel.onTurn) return;
    try {
      entry.channel.onTurn(event);
    } catch (err) {
      // A typing indicator is a courtesy: its failure must not reach the agent loop that published.
      this.log.warn(
        { err, channel: event.channel, chatId: event.chatId, kind: event.kind },
        "turn event failed",
      );
    }
  }

  private route(msg: OutboundMessage): void {
    const entry = this.roster.running(msg.channel);
    if (msg.kind === "delta") {
      if (entry) this.previewFor(entry, msg)?.update(msg.content);
      return;
    }
    if (msg.kind === "question") {
      this.enqueue({ msg });
      return;
    }
    if (msg.kind === "plan") {
      if (entry) this.showPlan(entry, msg);
      return;
    }
    // Taken off now, not when its turn comes in the chat's queue (see TurnPreviews.take).
    const replaces = msg.kind === "progress" || (msg.kind ?? "final") === "final";
    const preview = replaces ? this.previews.take(msg.turnId, Boolean(msg.media?.length)) : undefined;
    if (preview && msg.kind === "progress") {
      // The streamed text before tool calls: it is on screen already, so it stays, as progress.
      this.enqueue({ msg, preview });
      return;
    }
    if ((msg.kind ?? "final") !== "final") {
      // Progress, hints and edits are worth nothing later: shown now, as configured, or not at all.
      if (entry && wanted(msg, entry.options, this.opts)) this.enqueue({ msg });
      return;
    }
    // Every final reply is its own outbox entry, whatever turn it belongs to (or none).
    const once = this.finals?.number(msg);
    this.enqueue({
      msg,
      // A reply sent once in the cluster is recorded in the cluster's outbox, not in this
      // instance's journal: resent from there at a restart, it would go out twice.
      outboxId: once ? undefined : this.opts.journal?.recordOutbound(msg),
      ...(preview ? { preview } : {}),
      ...(once ? { once } : {}),
    });
  }

  private enqueue(pending: Pending): void {
    const { msg } = pending;
    this.inChatOrder(msg, () => this.deliver(pending));
  }

  /**
   * Sends one message. A final reply is retried with backoff (honouring the platform's retry-after)
   * for a bounded time while the chat's later messages wait, so order is kept; a permanent failure
   * is dropped at once. Progress and hints are tried once. A reply whose channel is not running is
   * kept until it runs. Stopping the manager ends the retries but leaves the reply in the journal.
   */
  private async deliver(pending: Pending): Promise<void> {
    const { msg, outboxId } = pending;
    // Questions are retried like replies (a turn waits on them) but never journaled.
    const final = ["final", "question"].includes(msg.kind ?? "final");
    const deadline = Date.now() + (this.opts.outboxRetryMs ?? 10 * 60_000);
    const policy = { baseMs: this.opts.outboxRetryBaseMs ?? 1000, maxMs: 60_000 };
    for (let attempt = 0; ; attempt++) {
      const entry = this.roster.get(msg.channel);
      if (entry?.state !== "running") {
        if (final) this.hold(pending, entry);
        return;
      }
      try {
        if (!(await this.claimed(pending, entry.channel))) return;
        if (await this.finishPreview(pending)) {
          if (outboxId) this.opts.journal?.markSent(outboxId);
          if (pending.once) this.finals?.confirm(pending.once);
          this.opts.meter?.delivered(msg);
          return;
        }
        const sent = await entry.channel.send(msg);
        if (msg.question && sent) this.opts.questions?.delivered(msg.question.id, sent.ref);
        if (outboxId) this.opts.journal?.markSent(outboxId);
        if (pending.once) this.finals?.confirm(pending.once);
        this.opts.meter?.delivered(msg);
        return;
      } catch (err) {
        const failure = classifySendFailure(err, attempt, policy);
        const fields = {
          err,
          channel: msg.channel,
          chatId: msg.chatId,
          kind: msg.kind,
          ...failureFields(err),
        };
        if (!final) {
          this.log.warn(fields, "sending failed");
          this.undelivered(pending, "failed_once", failure.reason);
          return;
        }
        if (!failure.retry) {
          this.log.warn({ ...fields, reason: failure.reason }, "reply can never be delivered; dropped");
          this.undelivered(pending, "permanent", failure.reason);
          return;
        }
        if (Date.now() + failure.delayMs > deadline) {
          this.log.error({ ...fields, reason: failure.reason }, "reply could not be delivered; giving up");
          this.undelivered(pending, "gave_up", failure.reason);
          return;
        }
        this.log.warn({ ...fields, retryInMs: Math.round(failure.delayMs) }, "sending failed; will retry");
        try {
          await sleep(failure.delayMs, this.lifetime.signal);
        } catch {
          return; // shutting down: the journal keeps it for the next start
        }
        this.opts.journal?.syncExternalDrops();
        if (this.droppedMeanwhile(pending)) {
          this.log.info(
            { channel: msg.channel, chatId: msg.chatId },
            "reply dropped by `palaver outbox drop`; not sent",
          );
          return;
        }
      }
    }
  }

  /**
   * Cluster mode: whether this instance sends this final reply (no other attempt of its turn
   * claimed it). Claimed once, as late as it can be: after the channel's own waits, so that all
   * but the request itself lies before the claim (docs/cluster.md, "When something fails").
   */
  private async claimed(pending: Pending, channel: Channel): Promise<boolean> {
    if (!pending.once || pending.claimed) return true;
    await channel.readyToSend?.(pending.msg);
    if (await this.finals!.claim(pending.once, pending.msg)) {
      pending.claimed = true;
      return true;
    }
    const { msg } = pending;
    this.log.info(
      { channel: msg.channel, chatId: msg.chatId, turnId: msg.turnId },
      "reply already sent by an earlier attempt of its turn",
    );
    return false;
  }

  /** The turn's live preview, made on its first delta when the channel and the config stream. */
  private previewFor(entry: RosterEntry, msg: OutboundMessage): LivePreview | undefined {
    const turnId = msg.turnId;
    if (!turnId || !(entry.options.streaming ?? this.opts.streaming ?? false)) return undefined;
    return this.previews.forDelta(turnId, () => {
      const target = { ...surfaceTarget(msg, turnId), ...(msg.replyTo ? { replyTo: msg.replyTo } : {}) };
      const surface = entry.channel.previewSurface?.(target);
      if (!surface) return undefined;
      return journaledPreview(
        surface,
        this.paceOf(entry, surface),
        {
          chatId: msg.chatId,
          turnId,
          channel: entry.channel.name,
          threadId: msg.threadId,
          metadata: msg.metadata,
        },
        this.opts.journal,
      );
    });
  }

  /**
   * A final (or the progress text before tool calls) of a turn with a live preview replaces the
   * preview in place. False when there is none or it could not be replaced: the message is then
   * sent as usual, so the user gets it exactly once either way.
   */
  private async finishPreview(pending: Pending): Promise<boolean> {
    const { msg, preview } = pending;
    if (!preview) return false;
    pending.preview = undefined; // once: a retried send goes out as a new message
    const replaced = await preview.finish(msg.content);
    if (!replaced && msg.kind === "progress") {
      // Shown as a preview already; sent again only when progress is wanted.
      const entry = this.roster.get(msg.channel);
      return !entry || !wanted(msg, entry.options, this.opts);
    }
    return replaced;
  }

  /**
   * The turn's checklist: its own message, edited in place at the pace of streamed previews. A chat
   * that cannot show one gets each changed checklist as a message, tried once like progress.
   */
  private showPlan(entry: RosterEntry, msg: OutboundMessage): void {
    const turnId = msg.turnId;
    if (!turnId) {
      this.enqueue({ msg });
      return;
    }
    const shown = this.plans.show(turnId, msg.content, () => {
      const surface = entry.channel.planSurface?.(surfaceTarget(msg, turnId));
      return surface && new LivePreview(surface, { intervalMs: this.paceOf(entry, surface) });
    });
    if (shown === "send") this.enqueue({ msg });
  }

  /** How often a turn's live message may change: the channel's setting, the global one, the platform's pace. */
  private paceOf(entry: RosterEntry, surface: PreviewSurface): number {
    return entry.options.streamIntervalMs ?? this.opts.streamIntervalMs ?? surface.intervalMs ?? 1000;
  }

  /** The turn ended: its checklist message gets the last checklist (one still paced goes out now) and stays. */
  private finishPlan(event: TurnEvent): void {
    const plan = this.plans.end(event.turnId);
    if (!plan) return;
    this.inChatOrder(event, async () => {
      if (!(await plan.message.finish(plan.checklist))) {
        this.log.debug(
          { channel: event.channel, chatId: event.chatId },
          "the plan's last checklist could not be shown",
        );
      }
    });
  }

  /** A turn ended with a preview still open (stopped, or no final): it sends nothing more. */
  private closePreview(event: TurnEvent): void {
    const preview = this.previews.end(event.turnId);
    if (!preview) return;
    // Behind the turn's replies in the chat's queue, so the mark goes on the last text shown.
    this.inChatOrder(event, () => (event.outcome === "stopped" ? preview.stop() : preview.close()));
  }

  /** Runs `work` after what is queued for the chat: one chat's messages go out in order. */
  private inChatOrder(chat: ChatPlace, work: () => Promise<void> | void): void {
    this.sends.push(chatKey(chat), work);
  }

  /** Keeps a final reply for a channel that is not running; the oldest goes when too many wait. */
  private hold(pending: Pending, entry: RosterEntry | undefined): void {
    const { msg } = pending;
    const kept = this.opts.journal ? " in the journal" : "";
    this.log.warn(
      { channel: msg.channel, chatId: msg.chatId, state: entry?.state ?? "not enabled" },
      entry
        ? `undelivered reply for channel ${msg.channel}, which is not running (${entry.state}); kept until it runs`
        : `undelivered reply for channel ${msg.channel}, which is not enabled; kept${kept} until it is`,
    );
    const pushedOut = this.held.hold(msg.channel, pending);
    if (pushedOut) {
      const reason = `more than ${this.held.maxPerChannel} replies waiting for channel ${msg.channel}`;
      this.log.warn(
        { channel: msg.channel, chatId: pushedOut.msg.chatId },
        `${reason}; the oldest is dropped`,
      );
      this.undelivered(pushedOut, "overflow", reason);
    }
  }

  /** The channel runs (again): what was kept for it goes out, oldest first. */
  private releaseHeld(name: string): void {
    this.forgetDroppedHeld();
    const kept = this.held.take(name);
    if (kept.length)
      this.log.info(
        { channel: name, count: kept.length },
        "delivering replies kept while it was not running",
      );
    for (const pending of kept) this.enqueue(pending);
  }

  private undelivered(pending: Pending, why: UndeliveredReason, reason: string): void {
    if (pending.outboxId) this.opts.journal?.markDropped(pending.outboxId, reason);
    this.opts.meter?.failed(pending.msg, why);
  }
}

/** The chat a message or turn belongs to. */
type ChatPlace = Pick<OutboundMessage, "channel" | "chatId">;

/** A chat's key in the per-chat send queue. */
function chatKey(chat: ChatPlace): string {
  return `${chat.channel}:${chat.chatId}`;
}

/** Where a turn's live message (the streamed reply, the plan) goes: the chat and its thread. */
function surfaceTarget(msg: OutboundMessage, turnId: string): PreviewTarget {
  return {
    chatId: msg.chatId,
    turnId,
    ...replyPlaceOf(msg),
    ...(msg.metadata ? { metadata: msg.metadata } : {}),
  };
}

/** Progress and tool hints go out only when configured (per channel, else globally). */
function wanted(msg: OutboundMessage, channel: ChannelOptions, global: ChannelManagerOptions): boolean {
  switch (msg.kind ?? "final") {
    case "final":
    case "question":
    case "edit":
    case "plan":
      return true;
    case "progress":
      return channel.sendProgress ?? global.sendProgress;
    case "toolHint":
      return channel.sendToolHints ?? global.sendToolHints;
    case "delta":
      return false;
  }
}
