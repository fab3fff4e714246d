/**
 * Usage added up: per conversation, model, kind, agent or day, since a date; and how a sum reads.
 * Pure, shared by `/usage`, `palaver usage` and the web chat's panel.
 */
import type { UsageEntry } from "./record.js";

export type UsageGrouping = "chat" | "model" | "kind" | "agent" | "day";
export const USAGE_GROUPINGS: readonly UsageGrouping[] = ["chat", "model", "kind", "agent", "day"];

export interface UsageSum {
  calls: number;
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  reasoningTokens: number;
  /** USD of the calls whose model has a price. */
  costUsd: number;
  /** Calls whose model has no price (counted in tokens only). */
  unpricedCalls: number;
  /** Calls whose counts were estimated. */
  estimatedCalls: number;
}

export interface UsageRow extends UsageSum {
  key: string;
}

function emptySum(): UsageSum {
  return {
    calls: 0,
    promptTokens: 0,
    completionTokens: 0,
    cachedTokens: 0,
    reasoningTokens: 0,
    costUsd: 0,
    unpricedCalls: 0,
    estimatedCalls: 0,
  };
}

function addEntry(sum: UsageSum, e: UsageEntry): UsageSum {
  sum.calls += 1;
  sum.promptTokens += e.promptTokens;
  sum.completionTokens += e.completionTokens;
  sum.cachedTokens += e.cachedTokens;
  sum.reasoningTokens += e.reasoningTokens;
  if (e.costUsd === null) sum.unpricedCalls += 1;
  else sum.costUsd += e.costUsd;
  if (e.estimated) sum.estimatedCalls += 1;
  return sum;
}

export function sumOf(entries: Iterable<UsageEntry>): UsageSum {
  let sum = emptySum();
  for (const e of entries) sum = addEntry(sum, e);
  return sum;
}

/** The local calendar day of an ISO time, `2026-11-03`. */
export function dayOf(time: string | Date): string {
  const d = typeof time === "string" ? new Date(time) : time;
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

/** The local calendar month of an ISO time, `2026-11`. */
export function monthOf(time: string | Date): string {
  return dayOf(time).slice(0, 7);
}

function keyOf(e: UsageEntry, by: UsageGrouping): string {
  switch (by) {
    case "chat":
      return e.session ?? "(no conversation)";
    case "model":
      return e.model;
    case "kind":
      return e.kind;
    case "agent":
      return e.agent;
    case "day":
      return dayOf(e.time);
  }
}

/** The entries on or after the local day `since` (`2026-11-01`); all without it. */
export function entriesSince(entries: readonly UsageEntry[], since: string | undefined): UsageEntry[] {
  return since ? entries.filter((e) => dayOf(e.time) >= since) : [...entries];
}

/** Entries grouped; the most expensive first (days in order). */
export function groupUsage(entries: readonly UsageEntry[], by: UsageGrouping): UsageRow[] {
  const groups = new Map<string, UsageSum>();
  for (const e of entries) {
    const key = keyOf(e, by);
    groups.set(key, addEntry(groups.get(key) ?? emptySum(), e));
  }
  const rows = [...groups].map(([key, sum]) => ({ key, ...sum }));
  return by === "day"
    ? rows.sort((a, b) => a.key.localeCompare(b.key))
    : rows.sort((a, b) => b.costUsd - a.costUsd || b.promptTokens - a.promptTokens);
}

/** "$0.0123", "$12.34": small sums keep their cents' fractions. */
export function formatUsd(usd: number): string {
  return usd >= 1 ? `$${usd.toFixed(2)}` : `$${usd.toFixed(4)}`;
}

/** The cost part of a sum: "$0.0123", "no price", "$0.0123 (+2 calls without a price)". */
export function formatCost(sum: UsageSum): string {
  if (sum.calls > 0 && sum.unpricedCalls === sum.calls) return "no price";
  const extra = sum.unpricedCalls
    ? ` (+${sum.unpricedCalls} call${sum.unpricedCalls === 1 ? "" : "s"} without a price)`
    : "";
  return `${formatUsd(sum.costUsd)}${extra}`;
}

/** "3 calls, 1200 tokens in (400 cached), 80 out (20 reasoning), $0.0123". */
export function formatSum(sum: UsageSum): string {
  if (sum.calls === 0) return "no LLM calls";
  const cached = sum.cachedTokens ? ` (${sum.cachedTokens} cached)` : "";
  const reasoning = sum.reasoningTokens ? ` (${sum.reasoningTokens} reasoning)` : "";
  const estimated = sum.estimatedCalls ? `, ${sum.estimatedCalls} estimated` : "";
  return (
    `${sum.calls} call${sum.calls === 1 ? "" : "s"}, ${sum.promptTokens} tokens in${cached}, ` +
    `${sum.completionTokens} out${reasoning}${estimated}, ${formatCost(sum)}`
  );
}
