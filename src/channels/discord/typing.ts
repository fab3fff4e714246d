/**
 * The "bot is typing…" indicator per chat. Discord shows it for ~10 s after
 * each POST /channels/:id/typing, so it is renewed every ~8 s while a turn
 * runs. A chat counts the messages it is waiting on: the indicator stops
 * when each has had its final reply, and in any case after `maxMs`, so a
 * turn that never answers cannot leave it on forever.
 */
import type { Logger } from "../../log.js";

export interface TypingOptions {
  /** Sends one typing signal; failures are logged, never thrown. */
  send: (chatId: string) => Promise<void>;
  intervalMs?: number;
  maxMs?: number;
  now?: () => number;
  log?: Logger;
}

interface Entry {
  waiting: number;
  startedAt: number;
  timer: NodeJS.Timeout;
}

export class TypingIndicator {
  private readonly chats = new Map<string, Entry>();
  private readonly intervalMs: number;
  private readonly maxMs: number;
  private readonly now: () => number;

  constructor(private readonly opts: TypingOptions) {
    this.intervalMs = opts.intervalMs ?? 8000;
    this.maxMs = opts.maxMs ?? 10 * 60_000;
    this.now = opts.now ?? Date.now;
  }

  /** A message was handed to the agent: show typing until its final reply. */
  begin(chatId: string): void {
    const entry = this.chats.get(chatId);
    if (entry) {
      entry.waiting++;
      entry.startedAt = this.now();
      return;
    }
    const timer = setInterval(() => this.tick(chatId), this.intervalMs);
    timer.unref();
    this.chats.set(chatId, { waiting: 1, startedAt: this.now(), timer });
    this.fire(chatId);
  }

  /** A final reply went out; stops the indicator when nothing else is awaited. */
  end(chatId: string): void {
    const entry = this.chats.get(chatId);
    if (!entry) return;
    entry.waiting--;
    if (entry.waiting <= 0) this.clear(chatId);
  }

  /** Sending a message hides the indicator in Discord's clients; show it again if still waiting. */
  renew(chatId: string): void {
    if (this.chats.has(chatId)) this.fire(chatId);
  }

  isActive(chatId: string): boolean {
    return this.chats.has(chatId);
  }

  stopAll(): void {
    for (const chatId of [...this.chats.keys()]) this.clear(chatId);
  }

  private tick(chatId: string): void {
    const entry = this.chats.get(chatId);
    if (!entry) return;
    if (this.now() - entry.startedAt >= this.maxMs) {
      this.opts.log?.debug({ chatId }, "typing indicator stopped after its time limit");
      this.clear(chatId);
      return;
    }
    this.fire(chatId);
  }

  private fire(chatId: string): void {
    this.opts.send(chatId).catch((err: unknown) => {
      this.opts.log?.debug({ err, chatId }, "typing indicator failed");
    });
  }

  private clear(chatId: string): void {
    const entry = this.chats.get(chatId);
    if (!entry) return;
    clearInterval(entry.timer);
    this.chats.delete(chatId);
  }
}
