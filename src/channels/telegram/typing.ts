/**
 * The "typing…" indicator. Telegram shows it for about five seconds per
 * sendChatAction, so it is repeated (every ~4 s) from the moment a message
 * is accepted until the final reply goes out. Progress messages do not end
 * it (Telegram hides the indicator when any message arrives, so it is shown
 * again right after them); /stop does; and it never runs longer than maxMs,
 * so a reply that never comes cannot leave a chat "typing" forever.
 */
import type { Logger } from "../../log.js";

export interface TypingOptions {
  send(chatId: string, threadId: number | undefined): Promise<void>;
  intervalMs: number;
  maxMs: number;
  /** How long a final reply waits for a typing call still out (default 2 s). */
  settleMs?: number;
  log?: Logger;
}

interface Entry {
  chatId: string;
  threadId: number | undefined;
  /** Accepted messages still waiting for their final reply. */
  pending: number;
  /** Set by /stop: its reply ends the indicator whatever is pending. */
  endOnNextReply: boolean;
  /** The sendChatAction call still out, if any. */
  inFlight: Promise<void> | null;
  repeat: NodeJS.Timeout;
  deadline: NodeJS.Timeout;
}

export class TypingIndicator {
  private readonly active = new Map<string, Entry>();

  constructor(private readonly opts: TypingOptions) {}

  /** A message for this conversation was accepted. */
  begin(key: string, chatId: string, threadId?: number): void {
    const existing = this.active.get(key);
    if (existing) {
      existing.pending++;
      return;
    }
    const entry: Entry = {
      chatId,
      threadId,
      pending: 1,
      endOnNextReply: false,
      inFlight: null,
      repeat: setInterval(() => this.tick(entry), this.opts.intervalMs),
      deadline: setTimeout(() => void this.end(key), this.opts.maxMs),
    };
    entry.repeat.unref();
    entry.deadline.unref();
    this.active.set(key, entry);
    this.tick(entry);
  }

  /** /stop was sent: the reply to it ends the indicator. */
  endOnNextReply(key: string): void {
    const entry = this.active.get(key);
    if (entry) entry.endOnNextReply = true;
  }

  /**
   * A final reply is about to be sent to this conversation. Resolves once no
   * typing call is out any more, so none lands after the reply (which would
   * show "typing…" again under it).
   */
  async replied(key: string): Promise<void> {
    const entry = this.active.get(key);
    if (!entry) return;
    entry.pending = entry.endOnNextReply ? 0 : entry.pending - 1;
    if (entry.pending <= 0) await this.end(key);
  }

  /** A progress message went out; Telegram hid the indicator, so show it again now. */
  poke(key: string): void {
    const entry = this.active.get(key);
    if (entry) this.tick(entry);
  }

  isActive(key: string): boolean {
    return this.active.has(key);
  }

  /** Stops the indicator; resolves when its last call has settled (bounded by settleMs). */
  async end(key: string): Promise<void> {
    const entry = this.active.get(key);
    if (!entry) return;
    clearInterval(entry.repeat);
    clearTimeout(entry.deadline);
    this.active.delete(key);
    if (!entry.inFlight) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      entry.inFlight,
      new Promise((r) => (timer = setTimeout(r, this.opts.settleMs ?? 2000))),
    ]);
    clearTimeout(timer);
  }

  endAll(): void {
    for (const key of [...this.active.keys()]) void this.end(key);
  }

  private tick(entry: Entry): void {
    if (entry.inFlight) return; // a slow or rate-limited call is still out; do not pile up
    entry.inFlight = this.opts
      .send(entry.chatId, entry.threadId)
      .catch((err: unknown) => this.opts.log?.debug({ err, chatId: entry.chatId }, "typing indicator failed"))
      .finally(() => (entry.inFlight = null));
  }
}
