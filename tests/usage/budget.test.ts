/**
 * The budget's decisions (pure) and its warning marker: a restart in the same period does not
 * warn again; a new period does.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { logger } from "../../src/log.js";
import { BudgetWatch, budgetStatus } from "../../src/usage/budget.js";
import type { UsageEntry } from "../../src/usage/record.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-budget-unit-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const limits = { monthlyUsd: 10, dailyUsd: 2, warnAt: 0.8, hardStop: false };

describe("budgetStatus", () => {
  const now = new Date(2026, 10, 27, 15, 0); // 27 November, local time

  it("is ok below the warning level, warns at it, and is over at 100 %", () => {
    expect(budgetStatus(limits, { month: 7, day: 1 }, now).state).toBe("ok");
    expect(budgetStatus(limits, { month: 8, day: 1 }, now)).toMatchObject({
      state: "warn",
      period: "monthly",
    });
    expect(budgetStatus(limits, { month: 10, day: 1 }, now)).toMatchObject({
      state: "over",
      period: "monthly",
      resetAt: new Date(2026, 11, 1),
    });
  });

  it("a spent day is over even when the month is only at the warning level; it resets at local midnight", () => {
    expect(budgetStatus(limits, { month: 8, day: 2 }, now)).toMatchObject({
      state: "over",
      period: "daily",
      resetAt: new Date(2026, 10, 28),
    });
  });

  it("without limits it is always ok", () => {
    expect(budgetStatus({ warnAt: 0.8, hardStop: false }, { month: 1e6, day: 1e6 }, now).state).toBe("ok");
  });
});

function entry(time: Date, costUsd: number): UsageEntry {
  return {
    time: time.toISOString(),
    session: null,
    agent: "main",
    kind: "chat",
    model: "m",
    provider: "p",
    promptTokens: 1,
    completionTokens: 0,
    cachedTokens: 0,
    reasoningTokens: 0,
    costUsd,
  };
}

describe("BudgetWatch", () => {
  it("warns once per period, across a restart, and again in the next month", () => {
    let now = new Date(2026, 10, 27, 15, 0);
    const told: string[] = [];
    const watch = (entries: UsageEntry[]) =>
      new BudgetWatch({
        budget: () => ({ monthlyUsd: 10, warnAt: 0.8, hardStop: false }),
        entries,
        markerPath: join(dir, "usage", "budget-warned.json"),
        notifyOwners: (text) => told.push(text),
        log: logger("budget-test"),
        now: () => now,
      });
    const first = watch([entry(now, 7)]);
    first.record(entry(now, 0.5));
    expect(told).toHaveLength(0);
    first.record(entry(now, 1)); // $8.50: 85 %
    first.record(entry(now, 0.1));
    expect(told).toHaveLength(1);

    // Restarted: the totals come from the ledger, the marker says it was said.
    const second = watch([entry(now, 8.6)]);
    second.record(entry(now, 0.1));
    expect(told).toHaveLength(1);
    expect(second.status().state).toBe("warn");

    // December: last month's spending no longer counts, and a new crossing warns again.
    now = new Date(2026, 11, 2, 9, 0);
    expect(second.status().state).toBe("ok");
    second.record(entry(now, 9));
    expect(told).toHaveLength(2);
  });
});
