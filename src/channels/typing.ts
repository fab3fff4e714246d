/**
 * The one "typing…" indicator of every platform. A platform supplies only its
 * one-shot call (Telegram sendChatAction, Discord sendTyping, a Slack
 * reaction); this owns the refresh, the bound and the end.
 *
 * It keys on turns, not on replies: a conversation shows typing from the
 * turnStart of a turn until the turnEnd of the same turn id, and while two
 * turns run there (a user's and a reminder's) until both ended. A reply that
 * belongs to no turn (a cron delivery, the message tool) never ends it. No
 * conversation types for longer than `maxMs`, so a lost turnEnd cannot leave
 * a chat "typing" forever.
 *
 * Cost: one platform call per running turn's conversation per interval, never one for a message
 * that waits in a queue (its chat types once its turn starts), never two calls out at once.
 */
import type { TurnEvent } from "../bus/types.js";
import type { Logger } from "../log.js";
import { settleWithin } from "../util/timeout.js";

export interface TypingOptions<T> {
  /** One signal for a conversation; the platform shows it for a few seconds. Errors are logged, never thrown. */
  signal(target: T): Promise<void>;
  /** Called once when a conversation's indicator ends (e.g. swap a receipt reaction). Optional. */
  stop?(target: T): Promise<void>;
  /** How often the signal is repeated while a turn runs; 0 = signal once (a reaction). */
  intervalMs: number;
  /** The longest a conversation shows typing without a new turn starting. */
  maxMs: number;
  /** How long end() and settle() wait for a signal still out (default 2 s). */
  settleMs?: number;
  log?: Logger;
}

interface Conversation<T> {
  target: T;
  turns: Set<string>;
  /** The signal call still out, if any: never two at once for one conversation. */
  inFlight: Promise<void> | null;
  repeat: NodeJS.Timeout | undefined;
  deadline: NodeJS.Timeout;
}

export class TypingIndicator<T> {
  private readonly conversations = new Map<string, Conversation<T>>();
  /** turnId → conversation key. */
  private readonly turns = new Map<string, string>();

  constructor(private readonly opts: TypingOptions<T>) {}

  /**
   * Applies a turn event: turnStart starts typing in conversation `key` (unless the turn is
   * background work nobody waits on), turnEnd ends that turn's share of it. `target` is only read
   * on turnStart.
   */
  onTurn(event: TurnEvent, key: string, target: () => T): void {
    if (event.kind === "turnEnd") void this.end(event.turnId);
    else if (!event.background) this.start(key, event.turnId, target());
  }

  /** A turn started in this conversation. */
  start(key: string, turnId: string, target: T): void {
    this.turns.set(turnId, key);
    const existing = this.conversations.get(key);
    if (existing) {
      existing.turns.add(turnId);
      existing.deadline.refresh();
      return;
    }
    const conversation: Conversation<T> = {
      target,
      turns: new Set([turnId]),
      inFlight: null,
      repeat: undefined,
      deadline: setTimeout(() => {
        this.opts.log?.debug({ key }, "typing indicator stopped after its time limit");
        void this.finish(key);
      }, this.opts.maxMs),
    };
    conversation.deadline.unref();
    if (this.opts.intervalMs > 0) {
      conversation.repeat = setInterval(() => this.fire(conversation), this.opts.intervalMs);
      conversation.repeat.unref();
    }
    this.conversations.set(key, conversation);
    this.fire(conversation);
  }

  /** A turn ended. Resolves once its conversation's indicator is off (if this was its last turn). */
  async end(turnId: string): Promise<void> {
    const key = this.turns.get(turnId);
    if (key === undefined) return;
    this.turns.delete(turnId);
    const conversation = this.conversations.get(key);
    if (!conversation) return;
    conversation.turns.delete(turnId);
    if (conversation.turns.size === 0) await this.finish(key);
  }

  /**
   * A message went out (platforms hide the indicator then): show it again if a turn still runs.
   * The repeat starts over from here, so the chat still gets at most one call per interval.
   */
  renew(key: string): void {
    const conversation = this.conversations.get(key);
    if (!conversation || this.opts.intervalMs <= 0) return;
    conversation.repeat?.refresh();
    this.fire(conversation);
  }

  /**
   * Waits (bounded) for a signal still out in this conversation, so that it does not land after the
   * message about to be sent and show "typing…" under it.
   */
  async settle(key: string): Promise<void> {
    const inFlight = this.conversations.get(key)?.inFlight;
    if (inFlight) await settleWithin(inFlight, this.opts.settleMs ?? 2000);
  }

  isActive(key: string): boolean {
    return this.conversations.has(key);
  }

  /** Shutdown: every indicator off at once, without the stop calls. */
  stopAll(): void {
    for (const conversation of this.conversations.values()) this.clearTimers(conversation);
    this.conversations.clear();
    this.turns.clear();
  }

  private async finish(key: string): Promise<void> {
    const conversation = this.conversations.get(key);
    if (!conversation) return;
    this.conversations.delete(key);
    for (const turnId of conversation.turns) this.turns.delete(turnId);
    this.clearTimers(conversation);
    if (conversation.inFlight) await settleWithin(conversation.inFlight, this.opts.settleMs ?? 2000);
    await this.opts
      .stop?.(conversation.target)
      .catch((err: unknown) => this.opts.log?.debug({ err, key }, "ending the typing indicator failed"));
  }

  private fire(conversation: Conversation<T>): void {
    if (conversation.inFlight) return; // a slow or rate-limited call is still out; do not pile up
    conversation.inFlight = this.opts
      .signal(conversation.target)
      .catch((err: unknown) => this.opts.log?.debug({ err }, "typing indicator failed"))
      .finally(() => (conversation.inFlight = null));
  }

  private clearTimers(conversation: Conversation<T>): void {
    clearInterval(conversation.repeat);
    clearTimeout(conversation.deadline);
  }
}
