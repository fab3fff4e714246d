/**
 * Schedules of cron jobs: validating what a person or the model asked for, and
 * the pure next-run computation the scheduler arms its timer with.
 *
 * Cron expressions are validated and expanded by node-cron (`validateDetailed`:
 * names, ranges, steps, L/W/#), but the next run is computed here: node-cron v4
 * only offers next runs from the current wall clock on a live task (and ANDs
 * day-of-month with day-of-week), while the scheduler needs a pure
 * `nextRun(schedule, afterMs)` with classic cron semantics (either day field
 * matches when both are restricted, as croniter does for nanobot).
 *
 * Time zones come from Intl. A wall time the clocks skip (spring forward) runs
 * at the moment of the jump; a wall time that happens twice (fall back) runs
 * once, the first time. With that mapping wall time → instant is monotone, so
 * the first matching wall time after `afterMs` is the earliest instant.
 */
import { validateDetailed } from "node-cron";
import { PalaverError } from "../util/errors.js";
import type { CronSchedule } from "./types.js";

/** A schedule the user or the model asked for is not valid; the message says why. */
export class ScheduleError extends PalaverError {}

/** Shorter intervals would turn a reminder into a flood of LLM turns. */
export const MIN_EVERY_SECONDS = 10;
/** Ten years: a longer interval would put the next run past what a Date can hold. */
export const MAX_EVERY_SECONDS = 10 * 366 * 24 * 3600;

const MINUTE = 60_000;
const DAY = 86_400_000;
/** Long enough for "29 Feb on a Monday" (28 years); each day costs a few integer checks. */
const MAX_DAYS = 366 * 29;

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

interface WallTime {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(tz: string | undefined): Intl.DateTimeFormat {
  const key = tz ?? "";
  let f = formatters.get(key);
  if (!f) {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone: tz,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    formatters.set(key, f);
  }
  return f;
}

/** The wall clock reading of an instant in `tz` (the host's zone when undefined). */
export function wallTime(ms: number, tz?: string): WallTime {
  const out: WallTime = { year: 0, month: 0, day: 0, hour: 0, minute: 0, second: 0 };
  for (const part of formatterFor(tz).formatToParts(new Date(ms))) {
    if (part.type in out) out[part.type as keyof WallTime] = Number(part.value);
  }
  return out;
}

/** Minutes east of UTC in `tz` at the instant `ms`. */
function offsetMinutes(ms: number, tz: string | undefined): number {
  const w = wallTime(ms, tz);
  const asUtc = Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second);
  return Math.round((asUtc - Math.floor(ms / 1000) * 1000) / MINUTE);
}

/**
 * The instant a wall-clock minute happens in `tz`: the first one when it
 * happens twice, the moment of the jump when the clocks skip it.
 */
export function wallToInstant(
  year: number,
  month: number,
  day: number,
  hour: number,
  minute: number,
  tz?: string,
): number {
  const guess = Date.UTC(year, month - 1, day, hour, minute);
  const before = offsetMinutes(guess - DAY, tz);
  const after = offsetMinutes(guess + DAY, tz);
  let best: number | undefined;
  for (const offset of new Set([before, after])) {
    const t = guess - offset * MINUTE;
    if (offsetMinutes(t, tz) === offset && (best === undefined || t < best)) best = t;
  }
  if (best !== undefined) return best;
  // Skipped by a jump forward: binary search (by minute) for the first instant on the new offset.
  let lo = guess - after * MINUTE; // still on the old offset
  let hi = guess - before * MINUTE; // already on the new one
  if (lo > hi) [lo, hi] = [hi, lo];
  for (let i = 0; i < 32 && hi - lo > MINUTE; i++) {
    const mid = lo + Math.floor((hi - lo) / 2 / MINUTE) * MINUTE;
    if (offsetMinutes(mid, tz) === before) lo = mid;
    else hi = mid;
  }
  return hi;
}

/** "2026-03-29 09:00 (Europe/Paris)": how times are shown to people and to the model. */
export function formatTime(ms: number, tz?: string): string {
  const w = wallTime(ms, tz);
  const p = (n: number) => String(n).padStart(2, "0");
  return `${w.year}-${p(w.month)}-${p(w.day)} ${p(w.hour)}:${p(w.minute)} (${tz ?? localTimezone()})`;
}

// ── Cron expressions ─────────────────────────────────────────

/** A 5-field expression expanded into the values each field allows. */
export interface CronFields {
  minutes: number[];
  hours: number[];
  /** Numbers, plus node-cron's tokens "L", "nW", "LW", "L-n". */
  daysOfMonth: (number | string)[];
  months: Set<number>;
  /** 0-6 (Sunday 0), plus node-cron's tokens "nL" (last n-day) and "n#k" (k-th n-day). */
  daysOfWeek: (number | string)[];
  /** A day field written as "*" or "?" does not restrict the day (the other one decides alone). */
  domStar: boolean;
  dowStar: boolean;
}

const NICKNAMES: Record<string, string> = {
  "@yearly": "0 0 1 1 *",
  "@annually": "0 0 1 1 *",
  "@monthly": "0 0 1 * *",
  "@weekly": "0 0 * * 0",
  "@daily": "0 0 * * *",
  "@midnight": "0 0 * * *",
  "@hourly": "0 * * * *",
};

/** Spaces collapsed, so the stored expression reads the way node-cron parses it. */
export function normalizeCronExpr(expr: string): string {
  return expr.trim().split(/\s+/).join(" ");
}

/** Validates a 5-field cron expression (or @daily ...) and expands its fields; throws ScheduleError. */
export function parseCronExpr(expr: string): CronFields {
  const normalized = normalizeCronExpr(expr);
  const expanded = NICKNAMES[normalized.toLowerCase()] ?? normalized;
  const raw = expanded.split(" ");
  if (raw.length !== 5) {
    throw new ScheduleError(
      `invalid cron expression "${expr}": expected 5 fields (minute hour day-of-month month day-of-week), got ${raw.length}`,
    );
  }
  const result = validateDetailed(expanded);
  if (!result.valid || !result.fields) {
    const why = result.errors.map((e) => e.message).join("; ") || "not a cron expression";
    throw new ScheduleError(`invalid cron expression "${expr}": ${why}`);
  }
  const f = result.fields;
  const numbers = (values: (number | string)[]) =>
    values.filter((v): v is number => typeof v === "number").sort((a, b) => a - b);
  const isStar = (field: string) => field === "*" || field === "?";
  return {
    minutes: numbers(f.minute),
    hours: numbers(f.hour),
    daysOfMonth: f.dayOfMonth,
    months: new Set(numbers(f.month)),
    daysOfWeek: f.dayOfWeek,
    domStar: isStar(raw[2]!),
    dowStar: isStar(raw[4]!),
  };
}

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

function weekdayOf(year: number, month: number, day: number): number {
  return new Date(Date.UTC(year, month - 1, day)).getUTCDay();
}

/** The weekday closest to `target` inside the month (cron's "nW"). */
function nearestWeekday(year: number, month: number, target: number): number {
  const last = daysInMonth(year, month);
  if (target > last) return -1;
  const wd = weekdayOf(year, month, target);
  if (wd === 6) return target === 1 ? 3 : target - 1;
  if (wd === 0) return target === last ? target - 2 : target + 1;
  return target;
}

function matchesDayOfMonth(values: (number | string)[], year: number, month: number, day: number): boolean {
  const last = daysInMonth(year, month);
  for (const v of values) {
    if (v === day) return true;
    if (typeof v !== "string") continue;
    if (v === "L" && day === last) return true;
    const w = /^(\d{1,2}|L)W$/.exec(v);
    if (w && nearestWeekday(year, month, w[1] === "L" ? last : Number(w[1])) === day) return true;
    const offset = /^L-(\d{1,2})$/.exec(v);
    if (offset && last - Number(offset[1]) === day) return true;
  }
  return false;
}

function matchesDayOfWeek(values: (number | string)[], year: number, month: number, day: number): boolean {
  const wd = weekdayOf(year, month, day);
  for (const v of values) {
    if (v === wd) return true;
    if (typeof v !== "string") continue;
    const lastOf = /^([0-7])L$/.exec(v);
    if (lastOf && Number(lastOf[1]) % 7 === wd && day + 7 > daysInMonth(year, month)) return true;
    const nth = /^([0-7])#([1-5])$/.exec(v);
    if (nth && Number(nth[1]) % 7 === wd && Math.floor((day - 1) / 7) + 1 === Number(nth[2])) return true;
  }
  return false;
}

function dayMatches(f: CronFields, year: number, month: number, day: number): boolean {
  if (!f.months.has(month)) return false;
  const dom = matchesDayOfMonth(f.daysOfMonth, year, month, day);
  const dow = matchesDayOfWeek(f.daysOfWeek, year, month, day);
  // Classic cron: when both day fields are restricted, either one matching is enough.
  return f.domStar || f.dowStar ? dom && dow : dom || dow;
}

/** The first instant strictly after `afterMs` that the expression matches in `tz`, or null. */
export function nextCronRun(fields: CronFields, afterMs: number, tz?: string): number | null {
  const start = wallTime(afterMs, tz);
  let { year, month, day } = start;
  for (let i = 0; i < MAX_DAYS; i++) {
    if (dayMatches(fields, year, month, day)) {
      for (const hour of fields.hours) {
        if (i === 0 && hour < start.hour) continue;
        for (const minute of fields.minutes) {
          // Wall times up to afterMs's own minute map to instants <= afterMs (monotone mapping).
          if (i === 0 && hour === start.hour && minute <= start.minute) continue;
          const at = wallToInstant(year, month, day, hour, minute, tz);
          if (at > afterMs) return at;
        }
      }
    }
    const next = new Date(Date.UTC(year, month - 1, day + 1));
    year = next.getUTCFullYear();
    month = next.getUTCMonth() + 1;
    day = next.getUTCDate();
  }
  return null;
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
      return nextCronRun(parseCronExpr(schedule.expr), afterMs, schedule.tz ?? undefined);
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
      parseCronExpr(schedule.expr);
      break;
  }
  if (schedule.tz) checkTimezone(schedule.tz);
}

const AT_PATTERN =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?)?\s*(Z|[+-]\d{2}(?::?\d{2})?)?$/i;

/**
 * An ISO date-time as epoch ms. Without an offset it is a wall time in `tz`
 * (the host's zone when undefined); a date alone means midnight.
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
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) throw bad();
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
  return wallToInstant(year, month, day, hour, minute, tz) + second * 1000 + ms;
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
    const fields = parseCronExpr(expr);
    if (nextCronRun(fields, nowMs, tz) === null) {
      throw new ScheduleError(`the cron expression "${expr}" never matches a date in the coming years`);
    }
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
