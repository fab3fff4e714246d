/**
 * Long polling: grammy's bot.start under a supervisor that restarts it after
 * failures (with backoff, or after retry_after when Telegram gave one), and a
 * watchdog that restarts it when no getUpdates call has finished for too
 * long (a connection that went silent).
 */
import { GrammyError, type Bot } from "grammy";
import type { Logger } from "../../log.js";
import { backoffDelay, sleep } from "../../util/backoff.js";
import { settleWithin } from "../../util/timeout.js";
import { gs } from "./api.js";
import type { TelegramConfig } from "../../config/platforms/telegram.js";
import type { TelegramTuning } from "./tuning.js";

/**
 * What palaver asks Telegram for: messages, presses on the buttons under its questions, and changes
 * of the bot's own membership (a user blocking it in their private chat drops their pairing code).
 */
export const ALLOWED_UPDATES = ["message", "callback_query", "my_chat_member"] as const;

export interface PollingOptions {
  bot: Bot;
  config: TelegramConfig;
  tuning: TelegramTuning;
  log: Logger;
  describe(err: unknown): string;
}

export class Polling {
  private supervisor: Promise<void> | null = null;
  private watchdog: NodeJS.Timeout | undefined;
  private lastActivity = 0;
  private restarting: Promise<void> | null = null;
  private running = false;

  constructor(private readonly opts: PollingOptions) {}

  /** A getUpdates call finished: polling is alive. */
  markActivity(): void {
    this.lastActivity = Date.now();
  }

  /**
   * Resolves once polling runs (rejects when the first start fails); afterwards the supervisor keeps
   * it running. `keepPending`: never drop what is waiting (a cluster's new lease holder takes over
   * the updates that came while the lease changed hands, whatever dropPendingUpdates says).
   */
  start(signal: AbortSignal, { keepPending = false }: { keepPending?: boolean } = {}): Promise<void> {
    const first = deferred();
    this.markActivity();
    this.supervisor = this.supervise(signal, first, keepPending);
    this.supervisor.catch(() => undefined);
    const { tuning, config } = this.opts;
    const watchdogMs = tuning.watchdogMs ?? 3 * (config.pollTimeout * 1000 + tuning.pollGraceMs);
    this.watchdog = setInterval(() => this.check(watchdogMs), Math.max(50, Math.min(watchdogMs / 4, 10_000)));
    this.watchdog.unref();
    return first.promise.then(() => void (this.running = true));
  }

  /** Stops polling (confirming the updates handled so far); bounded by stopTimeoutMs. */
  async stop(): Promise<void> {
    this.running = false;
    clearInterval(this.watchdog);
    this.watchdog = undefined;
    const { bot, tuning } = this.opts;
    if (bot.isRunning()) await settleWithin(bot.stop(), tuning.stopTimeoutMs);
    if (this.supervisor) await settleWithin(this.supervisor, tuning.stopTimeoutMs);
    this.supervisor = null;
    this.restarting = null;
  }

  private async supervise(signal: AbortSignal, first: Deferred, keepPending: boolean): Promise<void> {
    const { bot, config, tuning, log } = this.opts;
    let started = false;
    let failures = 0;
    // Bounded by the signal: each round either runs until stopped or sleeps a growing backoff.
    while (!signal.aborted) {
      try {
        await bot.start({
          timeout: config.pollTimeout,
          allowed_updates: [...ALLOWED_UPDATES],
          drop_pending_updates: !started && config.dropPendingUpdates && !keepPending,
          onStart: async () => {
            // A quick getUpdates (no offset: confirms nothing) surfaces a 409 now rather than mid-run.
            await bot.api.getUpdates({ limit: 1, timeout: 0 }, gs(signal));
            this.markActivity();
            if (!started) first.resolve();
            else log.info("Telegram polling is running again");
            started = true;
            failures = 0;
          },
        });
        // bot.start resolves when polling was stopped: by stop(), or by the watchdog to restart it.
        if (this.restarting) await settleWithin(this.restarting, tuning.stopTimeoutMs);
        this.restarting = null;
      } catch (err) {
        if (!started) {
          first.reject(err);
          return;
        }
        if (signal.aborted) return;
        const retryAfterMs = err instanceof GrammyError ? (err.parameters.retry_after ?? 0) * 1000 : 0;
        const waitMs = Math.max(
          retryAfterMs,
          backoffDelay(failures++, tuning.retryBaseMs, tuning.retryMaxMs),
        );
        log.error(
          { err, retryInMs: waitMs },
          `Telegram polling stopped: ${this.opts.describe(err)}; retrying`,
        );
        try {
          await sleep(waitMs, signal);
        } catch {
          return;
        }
      }
    }
  }

  private check(watchdogMs: number): void {
    const { bot, log } = this.opts;
    if (!this.running || this.restarting || !bot.isRunning()) return;
    const silentMs = Date.now() - this.lastActivity;
    if (silentMs < watchdogMs) return;
    log.warn({ silentMs }, "Telegram polling has gone silent; restarting it");
    this.markActivity();
    // Aborts the stuck getUpdates; the supervisor starts polling again once this has settled.
    this.restarting = bot.stop().catch((err: unknown) => log.debug({ err }, "stopping stalled polling"));
  }
}

interface Deferred {
  promise: Promise<void>;
  resolve: () => void;
  reject: (e: unknown) => void;
}

function deferred(): Deferred {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
