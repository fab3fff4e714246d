import { describe, expect, it } from "vitest";
import {
  buildSchedule,
  checkCronExpr,
  checkSchedule,
  describeSchedule,
  formatTime,
  MAX_EVERY_SECONDS,
  MIN_EVERY_SECONDS,
  nextRun,
  parseAt,
  ScheduleError,
} from "../../src/cron/schedule.js";
import type { CronSchedule } from "../../src/cron/types.js";

const cron = (expr: string, tz?: string): CronSchedule => ({ kind: "cron", expr, tz: tz ?? null });
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
const at = (text: string) => Date.parse(text);

/** The next `n` runs after `from`. */
function runs(schedule: CronSchedule, from: string, n: number): (string | null)[] {
  const out: (string | null)[] = [];
  let t: number | null = at(from);
  for (let i = 0; i < n && t !== null; i++) {
    t = nextRun(schedule, t);
    out.push(iso(t));
  }
  return out;
}

describe("nextRun: every and at", () => {
  it("every: the interval after the given instant", () => {
    expect(nextRun({ kind: "every", everyMs: 60_000 }, 1_000)).toBe(61_000);
    expect(nextRun({ kind: "every", everyMs: 0 }, 1_000)).toBeNull();
  });

  it("at: the instant while it is ahead, then never", () => {
    const s: CronSchedule = { kind: "at", atMs: 5_000 };
    expect(nextRun(s, 4_999)).toBe(5_000);
    expect(nextRun(s, 5_000)).toBeNull();
    expect(nextRun(s, 9_000)).toBeNull();
  });
});

describe("nextRun: cron expressions", () => {
  it("strictly after the instant, at whole minutes", () => {
    expect(runs(cron("*/15 * * * *", "UTC"), "2025-06-02T10:07:31Z", 3)).toEqual([
      "2025-06-02T10:15:00.000Z",
      "2025-06-02T10:30:00.000Z",
      "2025-06-02T10:45:00.000Z",
    ]);
    // Exactly on a matching minute: the next one, not the same.
    expect(iso(nextRun(cron("0 9 * * *", "UTC"), at("2025-06-02T09:00:00Z")))).toBe(
      "2025-06-03T09:00:00.000Z",
    );
  });

  it("0 9 * * * in Europe/Paris follows the clocks across the spring change (UTC+1 → UTC+2)", () => {
    expect(runs(cron("0 9 * * *", "Europe/Paris"), "2025-03-28T12:00:00Z", 3)).toEqual([
      "2025-03-29T08:00:00.000Z",
      "2025-03-30T07:00:00.000Z",
      "2025-03-31T07:00:00.000Z",
    ]);
  });

  it("0 9 * * * in America/New_York changes on its own date (a US DST change three weeks earlier)", () => {
    expect(runs(cron("0 9 * * *", "America/New_York"), "2025-03-08T00:00:00Z", 2)).toEqual([
      "2025-03-08T14:00:00.000Z",
      "2025-03-09T13:00:00.000Z",
    ]);
    // The same expression at the same instant is a different time in Paris.
    expect(nextRun(cron("0 9 * * *", "Europe/Paris"), at("2025-03-08T00:00:00Z"))).toBe(
      at("2025-03-08T08:00:00Z"),
    );
  });

  it("a wall time skipped by the spring change runs at the jump; a repeated one runs once", () => {
    // 2025-03-30 02:30 does not exist in Paris (02:00 → 03:00 CEST = 01:00Z).
    expect(runs(cron("30 2 * * *", "Europe/Paris"), "2025-03-29T12:00:00Z", 2)).toEqual([
      "2025-03-30T01:00:00.000Z",
      "2025-03-31T00:30:00.000Z",
    ]);
    // 2025-10-26 02:30 happens twice in Paris: only the first (CEST, 00:30Z).
    expect(runs(cron("30 2 * * *", "Europe/Paris"), "2025-10-25T12:00:00Z", 2)).toEqual([
      "2025-10-26T00:30:00.000Z",
      "2025-10-27T01:30:00.000Z",
    ]);
  });

  it("classic day semantics: day-of-month OR day-of-week when both are restricted", () => {
    // 2025-06-06 is a Friday, before the 13th.
    expect(iso(nextRun(cron("0 9 13 * 5", "UTC"), at("2025-06-01T00:00:00Z")))).toBe(
      "2025-06-06T09:00:00.000Z",
    );
    // With a "*" day-of-month, only the weekday decides (2025-06-02 is a Monday).
    expect(iso(nextRun(cron("0 9 * * 1-5", "UTC"), at("2025-05-31T00:00:00Z")))).toBe(
      "2025-06-02T09:00:00.000Z",
    );
  });

  it("names, nicknames, last day of month, n-th weekday", () => {
    expect(iso(nextRun(cron("0 8 * * mon", "UTC"), at("2025-06-03T00:00:00Z")))).toBe(
      "2025-06-09T08:00:00.000Z",
    );
    expect(iso(nextRun(cron("@daily", "UTC"), at("2025-06-03T10:00:00Z")))).toBe("2025-06-04T00:00:00.000Z");
    expect(iso(nextRun(cron("0 12 L * *", "UTC"), at("2025-02-03T00:00:00Z")))).toBe(
      "2025-02-28T12:00:00.000Z",
    );
    // Second Tuesday of July 2025 is the 8th.
    expect(iso(nextRun(cron("0 10 * 7 2#2", "UTC"), at("2025-06-03T00:00:00Z")))).toBe(
      "2025-07-08T10:00:00.000Z",
    );
    expect(iso(nextRun(cron("0 0 29 2 *", "UTC"), at("2025-01-01T00:00:00Z")))).toBe(
      "2028-02-29T00:00:00.000Z",
    );
  });

  // Speed is not asserted here (a loaded machine would fail it); that it returns at all is the point.
  it("is bounded, even for rare dates", () => {
    let t = at("2025-01-01T00:00:00Z");
    for (let i = 0; i < 500; i++) t = nextRun(cron("* * * * *", "Europe/Paris"), t)!;
    expect(iso(t)).toBe("2025-01-01T08:20:00.000Z");
    // Fifth Monday of February: only in some leap years.
    expect(iso(nextRun(cron("0 0 * 2 1#5", "UTC"), at("2025-01-01T00:00:00Z")))).toBe(
      "2044-02-29T00:00:00.000Z",
    );
  });
});

describe("validation", () => {
  it("rejects invalid cron expressions with the reason", () => {
    expect(() => checkCronExpr("61 * * * *")).toThrow(/invalid cron expression "61 \* \* \* \*".*minute/);
    expect(() => checkCronExpr("0 9 * *")).toThrow(/expected 5 fields/);
    expect(() => checkCronExpr("0 0 9 * * *")).toThrow(/expected 5 fields.*got 6/);
    expect(() => checkCronExpr("every day")).toThrow(ScheduleError);
    expect(() => checkCronExpr("0 0 31 2 *")).toThrow(/never matches a date/);
  });

  it("rejects unknown time zones", () => {
    expect(() => checkSchedule(cron("0 9 * * *", "Mars/Olympus"))).toThrow(
      /unknown timezone "Mars\/Olympus"/,
    );
  });

  it("parseAt: offsets, naive times in a zone, dates, bad input", () => {
    expect(iso(parseAt("2026-02-12T10:30:00Z"))).toBe("2026-02-12T10:30:00.000Z");
    expect(iso(parseAt("2026-02-12T10:30:00+01:00"))).toBe("2026-02-12T09:30:00.000Z");
    expect(iso(parseAt("2026-02-12 10:30", "Asia/Tokyo"))).toBe("2026-02-12T01:30:00.000Z");
    expect(iso(parseAt("2026-07-01T09:00:15.5", "Europe/Paris"))).toBe("2026-07-01T07:00:15.500Z");
    expect(iso(parseAt("2026-02-12", "UTC"))).toBe("2026-02-12T00:00:00.000Z");
    expect(() => parseAt("tomorrow at 9")).toThrow(/invalid date-time "tomorrow at 9"/);
    expect(() => parseAt("2026-02-30T10:00")).toThrow(/invalid date-time/);
  });

  it("parseAt reads a wall time in the zone, across its DST changes", () => {
    expect(iso(parseAt("2025-01-15T09:00", "Europe/Paris"))).toBe("2025-01-15T08:00:00.000Z");
    expect(iso(parseAt("2025-07-15T09:00", "Europe/Paris"))).toBe("2025-07-15T07:00:00.000Z");
    // 02:30 on 2025-10-26 happens twice in Paris: the first (CEST).
    expect(iso(parseAt("2025-10-26T02:30", "Europe/Paris"))).toBe("2025-10-26T00:30:00.000Z");
    // 02:30 on 2025-03-30 does not exist in Paris: croner moves it past the jump, to 03:30 CEST.
    expect(iso(parseAt("2025-03-30T02:30", "Europe/Paris"))).toBe("2025-03-30T01:30:00.000Z");
    expect(() => parseAt("2025-01-15T09:00", "Mars/Olympus")).toThrow(/unknown timezone/);
  });
});

describe("buildSchedule", () => {
  const now = at("2026-01-10T12:00:00Z");

  it("builds each kind; at is one-shot", () => {
    expect(buildSchedule({ everySeconds: 3600 }, now)).toEqual({
      schedule: { kind: "every", atMs: null, everyMs: 3_600_000, expr: null, tz: null },
      deleteAfterRun: false,
    });
    expect(buildSchedule({ cronExpr: "  0  9 * * 1-5 ", tz: "Europe/Paris" }, now)).toEqual({
      schedule: { kind: "cron", atMs: null, everyMs: null, expr: "0 9 * * 1-5", tz: "Europe/Paris" },
      deleteAfterRun: false,
    });
    expect(buildSchedule({ at: "2026-01-10T15:00:00", tz: "Europe/Paris" }, now)).toEqual({
      schedule: {
        kind: "at",
        atMs: at("2026-01-10T14:00:00Z"),
        everyMs: null,
        expr: null,
        tz: "Europe/Paris",
      },
      deleteAfterRun: true,
    });
  });

  it("says what is wrong, in the caller's option names", () => {
    expect(() => buildSchedule({}, now)).toThrow("no schedule: give one of every_seconds, cron_expr or at");
    expect(() => buildSchedule({ everySeconds: 60, cronExpr: "0 9 * * *" }, now)).toThrow(
      "more than one schedule (every_seconds and cron_expr)",
    );
    expect(() => buildSchedule({ everySeconds: 60, tz: "UTC" }, now)).toThrow(
      "tz can only be used with cron_expr or at",
    );
    expect(() => buildSchedule({ everySeconds: MIN_EVERY_SECONDS - 1 }, now)).toThrow(
      `every_seconds must be a whole number of at least ${MIN_EVERY_SECONDS} (got 9)`,
    );
    // 1e20 s would put the next run past what a Date can hold.
    expect(() => buildSchedule({ everySeconds: 1e20 }, now)).toThrow(
      `every_seconds can be at most ${MAX_EVERY_SECONDS} (ten years; got 100000000000000000000)`,
    );
    expect(() => buildSchedule({ cronExpr: "0 25 * * *" }, now)).toThrow(/invalid cron expression.*hour/);
    expect(() => buildSchedule({ cronExpr: "0 9 * * *", tz: "Nowhere/Land" }, now)).toThrow(
      /unknown timezone/,
    );
    expect(() => buildSchedule({ at: "2026-01-10T11:59:00Z", tz: "UTC" }, now)).toThrow(
      /the time 2026-01-10T11:59:00Z \(2026-01-10 11:59 \(UTC\)\) is in the past; it is now 2026-01-10 12:00 \(UTC\)/,
    );
    expect(() =>
      buildSchedule({ cronExpr: "0 9 * * *" }, now, {
        every: "--every",
        cron: "--cron",
        at: "--at",
        tz: "--tz",
      }),
    ).not.toThrow();
    expect(() =>
      buildSchedule({}, now, { every: "--every", cron: "--cron", at: "--at", tz: "--tz" }),
    ).toThrow("give one of --every, --cron or --at");
  });
});

describe("formatting", () => {
  it("formats times in the job's zone and describes schedules", () => {
    expect(formatTime(at("2026-01-10T08:00:00Z"), "Europe/Paris")).toBe("2026-01-10 09:00 (Europe/Paris)");
    expect(describeSchedule({ kind: "every", everyMs: 7_200_000 })).toBe("every 2h");
    expect(describeSchedule({ kind: "every", everyMs: 90_000 })).toBe("every 90s");
    expect(describeSchedule(cron("0 9 * * *", "Asia/Tokyo"))).toBe("cron 0 9 * * * (Asia/Tokyo)");
    expect(describeSchedule({ kind: "at", atMs: at("2026-01-10T08:00:00Z"), tz: "UTC" })).toBe(
      "at 2026-01-10 08:00 (UTC)",
    );
  });
});
