/**
 * Schedules of cron jobs: validating what a person or the model asked for, and
 * the pure next-run computation the scheduler arms its timer with.
 *
 * Cron expressions, time zones and daylight-saving changes are croner's: a job
 * is a paused `Cron` (no callback, so croner arms no timer of its own) asked
 * for `nextRun(after)`. Classic cron semantics, as croniter has them for
 * nanobot: five fields, and when both day fields are restricted either one
 * matching is enough (croner's default, `domAndDow: false`). A wall time the
 * clocks skip (spring forward) and one that happens twice (fall back) are
 * handled as croner documents: a skipped time runs once, after the jump; a
 * repeated one runs once.
 */
import { Cron } from "croner";
import { PalaverError } from "../util/errors.js";

/**
 * A job's schedule as jobs.json holds it (cron/types.ts `CronScheduleSchema`, which checks it
 * with checkSchedule): spelled out here so that schema can import this file.
 */
type CronSchedule = {
  kind: "at" | "every" | "cron";
  atMs?: number | null | undefined;
  everyMs?: number | null | undefined;
  expr?: string | null | undefined;
  tz?: string | null | undefined;
  [key: string]: unknown;
};

/** A schedule the user or the model asked for is not valid; the message says why. */
export class ScheduleError extends PalaverError {}

/** Shorter intervals would turn a reminder into a flood of LLM turns. */
export const MIN_EVERY_SECONDS = 10;
/** Ten years: a longer interval would put the next run past what a Date can hold. */
export const MAX_EVERY_SECONDS = 10 * 366 * 24 * 3600;

const MINUTE = 60_000;

// ── Time zones ───────────────────────────────────────────────

/** Throws a ScheduleError unless `tz` is a time zone Intl knows (IANA names such as "Europe/Paris"). */
export function checkTimezone(tz: string): void {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
  } catch (err) {
    throw new ScheduleError(`unknown timezone "${tz}": use an IANA name such as "Europe/Paris"`, {
      cause: err,
    });
  }
}

/** The name of the zone wall times without a tz are read in (the host's). */
export function localTimezone(): string {
  return new Intl.DateTimeFormat().resolvedOptions().timeZone;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

/** "2026-03-29 09:00 (Europe/Paris)": how times are shown to people and to the model. */
export function formatTime(ms: number, tz?: string): string {
  const key = tz ?? "";
  let format = formatters.get(key);
  if (!format) {
    // Swedish writes dates as ISO does (2026-03-29 09:00).
    format = new Intl.DateTimeFormat("sv-SE", {
      timeZone: tz,
      hourCycle: "h23",
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
    });
    formatters.set(key, format);
  }
  return `${format.format(new Date(ms))} (${tz ?? localTimezone()})`;
}

// ── Cron expressions ─────────────────────────────────────────

/** Spaces collapsed, so the stored expression reads the way it is parsed. */
export function normalizeCronExpr(expr: string): string {
  return expr.trim().split(/\s+/).join(" ");
}

/** The expression as a paused croner job in `tz` (the host's zone when undefined); throws ScheduleError. */
function cronJob(expr: string, tz?: string): Cron {
  const normalized = normalizeCronExpr(expr);
  // croner takes 6 and 7 fields (seconds, years) too; a stored nanobot job has 5.
  const fields = normalized.startsWith("@") ? 5 : normalized.split(" ").length;
  if (fields !== 5) {
    throw new ScheduleError(
      `invalid cron expression "${expr}": expected 5 fields (minute hour day-of-month month day-of-week), got ${fields}`,
    );
  }
  if (tz) checkTimezone(tz);
  try {
    return new Cron(normalized, { timezone: tz, mode: "5-part", paused: true });
  } catch (err) {
    const why = err instanceof Error ? err.message.replace(/^CronPattern: /, "") : String(err);
    throw new ScheduleError(`invalid cron expression "${expr}": ${why}`, { cause: err });
  }
}

/** Throws a ScheduleError when the expression is not valid cron, or never matches a date. */
export function checkCronExpr(expr: string, tz?: string, nowMs = Date.now()): void {
  if (cronJob(expr, tz).nextRun(new Date(nowMs)) === null) {
    throw new ScheduleError(`the cron expression "${normalizeCronExpr(expr)}" never matches a date`);
  }
}

// ── Schedules ────────────────────────────────────────────────

/** When the job runs next, strictly after `afterMs`; null when it never will. */
export function nextRun(schedule: CronSchedule, afterMs: number): number | null {
  switch (schedule.kind) {
    case "at":
      return schedule.atMs != null && schedule.atMs > afterMs ? schedule.atMs : null;
    case "every":
      return schedule.everyMs != null && schedule.everyMs > 0 ? afterMs + schedule.everyMs : null;
    case "cron":
      if (!schedule.expr) return null;
      return (
        cronJob(schedule.expr, schedule.tz ?? undefined)
          .nextRun(new Date(afterMs))
          ?.getTime() ?? null
      );
  }
}

/** Throws a ScheduleError when a stored schedule cannot be run. */
export function checkSchedule(schedule: CronSchedule): void {
  switch (schedule.kind) {
    case "at":
      if (schedule.atMs == null) throw new ScheduleError('an "at" schedule needs atMs');
      break;
    case "every":
      if (schedule.everyMs == null || schedule.everyMs <= 0) {
        throw new ScheduleError('an "every" schedule needs a positive everyMs');
      }
      break;
    case "cron":
      if (!schedule.expr) throw new ScheduleError('a "cron" schedule needs expr');
      cronJob(schedule.expr);
      break;
  }
  if (schedule.tz) checkTimezone(schedule.tz);
}

const AT_PATTERN =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?)?\s*(Z|[+-]\d{2}(?::?\d{2})?)?$/i;

/**
 * An ISO date-time as epoch ms. Without an offset it is a wall time in `tz`
 * (the host's zone when undefined), read by croner; a date alone means midnight.
 */
export function parseAt(text: string, tz?: string): number {
  const m = AT_PATTERN.exec(text.trim());
  const bad = () =>
    new ScheduleError(
      `invalid date-time "${text}": use ISO 8601 such as 2026-02-12T10:30:00 (optionally with Z or +01:00)`,
    );
  if (!m) throw bad();
  const [year, month, day, hour, minute, second] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i] ?? 0)) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const ms = m[7] ? Math.floor(Number(`0.${m[7]}`) * 1000) : 0;
  const lastDay = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (month < 1 || month > 12 || day < 1 || day > lastDay) throw bad();
  if (hour > 23 || minute > 59 || second > 59) throw bad();
  const offset = m[8];
  if (offset) {
    let offsetMin = 0;
    if (offset.toUpperCase() !== "Z") {
      const digits = offset.slice(1).replace(":", "");
      const oh = Number(digits.slice(0, 2));
      const om = Number(digits.slice(2) || 0);
      if (oh > 23 || om > 59) throw bad();
      offsetMin = (offset[0] === "-" ? -1 : 1) * (oh * 60 + om);
    }
    return Date.UTC(year, month - 1, day, hour, minute, second, ms) - offsetMin * MINUTE;
  }
  const p = (n: number, width = 2) => String(n).padStart(width, "0");
  const wall = `${p(year, 4)}-${p(month)}-${p(day)}T${p(hour)}:${p(minute)}:${p(second)}`;
  if (tz) checkTimezone(tz);
  // A one-off croner job at that wall time; allowPast, so a past time is read too (and refused by the caller).
  const instant = new Cron(wall, { timezone: tz, paused: true, allowPast: true }).nextRun();
  if (instant === null) throw bad();
  return instant.getTime() + ms;
}

/** What a person or the model asked for; names as the cron tool has them. */
export interface ScheduleRequest {
  everySeconds?: number;
  cronExpr?: string;
  tz?: string;
  at?: string;
}

/** How the options are called where the request came from, for error messages. */
export interface ScheduleLabels {
  every: string;
  cron: string;
  at: string;
  tz: string;
}

export const TOOL_LABELS: ScheduleLabels = { every: "every_seconds", cron: "cron_expr", at: "at", tz: "tz" };

export interface BuiltSchedule {
  schedule: CronSchedule;
  /** One-shot jobs are removed once they ran. */
  deleteAfterRun: boolean;
}

/**
 * Turns a request into a stored schedule, with an error that says what to fix
 * for: no schedule, several, an invalid expression, an unknown zone, a time in
 * the past, an interval too short, tz without cron_expr/at.
 */
export function buildSchedule(
  req: ScheduleRequest,
  nowMs: number,
  labels: ScheduleLabels = TOOL_LABELS,
): BuiltSchedule {
  const given = [
    req.everySeconds !== undefined ? labels.every : null,
    req.cronExpr ? labels.cron : null,
    req.at ? labels.at : null,
  ].filter((x): x is string => x !== null);
  const choices = `${labels.every}, ${labels.cron} or ${labels.at}`;
  if (given.length === 0) throw new ScheduleError(`no schedule: give one of ${choices}`);
  if (given.length > 1) {
    throw new ScheduleError(`more than one schedule (${given.join(" and ")}): give only one of ${choices}`);
  }
  const tz = req.tz || undefined;
  if (tz && !req.cronExpr && !req.at) {
    throw new ScheduleError(`${labels.tz} can only be used with ${labels.cron} or ${labels.at}`);
  }
  if (tz) checkTimezone(tz);

  if (req.everySeconds !== undefined) {
    const s = req.everySeconds;
    if (!Number.isInteger(s) || s < MIN_EVERY_SECONDS) {
      throw new ScheduleError(
        `${labels.every} must be a whole number of at least ${MIN_EVERY_SECONDS} (got ${s})`,
      );
    }
    if (s > MAX_EVERY_SECONDS) {
      throw new ScheduleError(`${labels.every} can be at most ${MAX_EVERY_SECONDS} (ten years; got ${s})`);
    }
    return {
      schedule: { kind: "every", atMs: null, everyMs: s * 1000, expr: null, tz: null },
      deleteAfterRun: false,
    };
  }
  if (req.cronExpr) {
    const expr = normalizeCronExpr(req.cronExpr);
    checkCronExpr(expr, tz, nowMs);
    return {
      schedule: { kind: "cron", atMs: null, everyMs: null, expr, tz: tz ?? null },
      deleteAfterRun: false,
    };
  }
  const atMs = parseAt(req.at!, tz);
  if (atMs <= nowMs) {
    throw new ScheduleError(
      `the time ${req.at} (${formatTime(atMs, tz)}) is in the past; it is now ${formatTime(nowMs, tz)}`,
    );
  }
  return { schedule: { kind: "at", atMs, everyMs: null, expr: null, tz: tz ?? null }, deleteAfterRun: true };
}

/** "every 2h", "cron 0 9 * * * (Europe/Paris)", "at 2026-02-12 10:30 (UTC)". */
export function describeSchedule(s: CronSchedule): string {
  switch (s.kind) {
    case "every": {
      const ms = s.everyMs ?? 0;
      if (ms % 3_600_000 === 0) return `every ${ms / 3_600_000}h`;
      if (ms % 60_000 === 0) return `every ${ms / 60_000}m`;
      if (ms % 1000 === 0) return `every ${ms / 1000}s`;
      return `every ${ms}ms`;
    }
    case "cron":
      return `cron ${s.expr ?? "?"} (${s.tz ?? `${localTimezone()}, local time`})`;
    case "at":
      return s.atMs != null ? `at ${formatTime(s.atMs, s.tz ?? undefined)}` : "at ?";
  }
}
