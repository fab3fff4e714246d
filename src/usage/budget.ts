/**
 * Spending limits (`budget` in the config): a monthly and a daily limit in US dollars, counted in
 * the host's local time zone (a month starts on the 1st at 00:00 local time, a day at 00:00).
 *
 * `budgetStatus` is the pure decision (spent, limits, now → ok / warn / over and when it resets);
 * `BudgetWatch` keeps the running totals (read once from the ledger at start, then added to by each
 * recorded call), tells the owners once per period when the warning level is crossed (a marker in
 * the state folder, so a restart does not warn again), and says what pauses at 100 %. The limits
 * are read through `budget()` on every decision, so a SIGHUP reload applies at once.
 */
import * as z from "zod";
import type { Logger } from "../log.js";
import { StateFile } from "../util/state-file.js";
import type { UsageEntry } from "./record.js";
import { dayOf, formatUsd, monthOf } from "./summary.js";

export interface BudgetLimits {
  monthlyUsd?: number | undefined;
  dailyUsd?: number | undefined;
  /** The fraction of a limit at which the owners are warned (0.8 = 80 %). */
  warnAt: number;
  /** At 100 %, conversations get a plain message instead of an answer (no LLM call). */
  hardStop: boolean;
}

export interface Spent {
  month: number;
  day: number;
}

export type BudgetPeriod = "monthly" | "daily";

export interface BudgetStatus {
  state: "ok" | "warn" | "over";
  /** The limit that decided the state (the one over, else the one at the warning level). */
  period?: BudgetPeriod;
  limitUsd?: number;
  spentUsd?: number;
  /** When that limit's period ends (local midnight), for "spent until …". */
  resetAt?: Date;
}

/** Pure: where spending stands against the limits at `now`. Over beats warn; a month beats a day. */
export function budgetStatus(limits: BudgetLimits, spent: Spent, now: Date): BudgetStatus {
  const checks: { period: BudgetPeriod; limit: number | undefined; spent: number }[] = [
    { period: "monthly", limit: limits.monthlyUsd, spent: spent.month },
    { period: "daily", limit: limits.dailyUsd, spent: spent.day },
  ];
  let warn: BudgetStatus | undefined;
  for (const { period, limit, spent: used } of checks) {
    if (limit === undefined) continue;
    const status = { period, limitUsd: limit, spentUsd: used, resetAt: resetOf(period, now) };
    if (used >= limit) return { state: "over", ...status };
    if (!warn && used >= limit * limits.warnAt) warn = { state: "warn", ...status };
  }
  return warn ?? { state: "ok" };
}

/** The local midnight that starts the next period. */
export function resetOf(period: BudgetPeriod, now: Date): Date {
  return period === "monthly"
    ? new Date(now.getFullYear(), now.getMonth() + 1, 1)
    : new Date(now.getFullYear(), now.getMonth(), now.getDate() + 1);
}

/** The period's key, `2026-11` or `2026-11-27`: what a warning marker is for. */
function periodKey(period: BudgetPeriod, now: Date): string {
  return period === "monthly" ? monthOf(now) : dayOf(now);
}

/** "the monthly budget of $5.00 is spent until 2026-12-01" */
export function describeOver(status: BudgetStatus): string {
  return `the ${status.period} budget of ${formatUsd(status.limitUsd ?? 0)} is spent until ${dayOf(status.resetAt ?? new Date())}`;
}

const MarkerSchema = z.object({ warned: z.array(z.string()) });
type Marker = z.infer<typeof MarkerSchema>;

export interface BudgetWatchOptions {
  /** The limits as they are now (the gateway's follow SIGHUP). */
  budget: () => BudgetLimits;
  /** The ledger's entries at start (the running totals begin from them). */
  entries: readonly UsageEntry[];
  /** `<state>/usage/budget-warned.json`: the periods already warned about. */
  markerPath: string;
  /** Tells the owners (their chats through the bus); the log line is written here. */
  notifyOwners: (text: string) => void;
  log: Logger;
  now?: () => Date;
}

export class BudgetWatch {
  private month = "";
  private day = "";
  private spent: Spent = { month: 0, day: 0 };
  private readonly marker: StateFile<Marker>;
  /** Periods whose pause was already logged (once per period and process). */
  private readonly pauseLogged = new Set<string>();
  private readonly now: () => Date;

  constructor(private readonly opts: BudgetWatchOptions) {
    this.now = opts.now ?? (() => new Date());
    this.marker = new StateFile(opts.markerPath, {
      schema: MarkerSchema,
      empty: () => ({ warned: [] }),
      what: "the budget warning marker",
      log: opts.log,
    });
    this.roll(this.now());
    for (const entry of opts.entries) this.add(entry);
  }

  /** One more recorded call: added to the totals, then the owners are warned if it crossed the level. */
  record(entry: UsageEntry): void {
    this.add(entry);
    this.check();
  }

  /** The decision now, the totals rolled over at local midnight. */
  status(): BudgetStatus {
    const now = this.now();
    this.roll(now);
    return budgetStatus(this.opts.budget(), this.spent, now);
  }

  /**
   * Why background work (heartbeat, cron, subagents) must not start now, or undefined. Logged at
   * warn once per period; `what` names the work for the log.
   */
  pausedReason(what: string): string | undefined {
    const status = this.status();
    if (status.state !== "over") return undefined;
    const reason = `paused: ${describeOver(status)}`;
    const key = `${status.period}:${periodKey(status.period ?? "monthly", this.now())}:${what}`;
    if (!this.pauseLogged.has(key)) {
      this.pauseLogged.add(key);
      this.opts.log.warn(
        { work: what, limitUsd: status.limitUsd, resetAt: status.resetAt },
        `${what} ${reason}`,
      );
    }
    return reason;
  }

  /** With hardStop, the plain reply a person gets instead of an answer once the budget is spent. */
  hardStopReply(): string | undefined {
    if (!this.opts.budget().hardStop) return undefined;
    const status = this.status();
    if (status.state !== "over") return undefined;
    const spent = describeOver(status);
    return `Sorry, ${spent}, so I cannot answer until then.`;
  }

  /** The /status line, when a limit is set (none without one). */
  statusLines(): string[] {
    const limits = this.opts.budget();
    if (limits.monthlyUsd === undefined && limits.dailyUsd === undefined) return [];
    const status = this.status();
    const parts = [
      ...(limits.monthlyUsd !== undefined
        ? [`${formatUsd(this.spent.month)} of ${formatUsd(limits.monthlyUsd)} this month`]
        : []),
      ...(limits.dailyUsd !== undefined
        ? [`${formatUsd(this.spent.day)} of ${formatUsd(limits.dailyUsd)} today`]
        : []),
    ];
    const over =
      status.state === "over"
        ? `; heartbeat, cron jobs and background tasks are paused (${describeOver(status)})`
        : "";
    return [`Budget: ${parts.join(", ")}${over}`];
  }

  private add(entry: UsageEntry): void {
    if (entry.costUsd === null) return;
    this.roll(this.now());
    if (monthOf(entry.time) === this.month) this.spent.month += entry.costUsd;
    if (dayOf(entry.time) === this.day) this.spent.day += entry.costUsd;
  }

  /** A new local day or month starts its total at zero. */
  private roll(now: Date): void {
    const month = monthOf(now);
    const day = dayOf(now);
    if (month !== this.month) this.spent.month = 0;
    if (day !== this.day) this.spent.day = 0;
    this.month = month;
    this.day = day;
  }

  /** Warns the owners once per period (the marker survives restarts) when a limit's level is reached. */
  private check(): void {
    const status = this.status();
    if (status.state === "ok" || !status.period) return;
    const key = `${status.period}:${periodKey(status.period, this.now())}`;
    let first: boolean;
    try {
      first = this.marker.update((current) => {
        if (current.warned.includes(key)) return { result: false };
        // Only this period's markers are kept: older ones can never match again.
        const kept = current.warned.filter((k) => k.startsWith(`${status.period}:`) === false);
        return { next: { warned: [...kept, key] }, result: true };
      });
    } catch (err) {
      // An unreadable marker: warn in the log only, so the owners are not told on every call.
      this.opts.log.warn({ err, path: this.marker.path }, "could not read the budget warning marker");
      return;
    }
    if (!first) return;
    const used = formatUsd(status.spentUsd ?? 0);
    const limit = formatUsd(status.limitUsd ?? 0);
    const text =
      status.state === "over"
        ? `Budget: ${used} spent, ${describeOver(status)}. Heartbeat, cron jobs and background tasks are paused.`
        : `Budget: ${used} of the ${status.period} budget of ${limit} is spent (the warning level is ${Math.round(this.opts.budget().warnAt * 100)} %).`;
    this.opts.log.warn({ period: status.period, spentUsd: status.spentUsd, limitUsd: status.limitUsd }, text);
    this.opts.notifyOwners(text);
  }
}
