/**
 * One way for every benchmark to report a number: the median of several rounds, their spread
 * (min–max, and the half-range as a share of the median), the target and the ratio
 * median/target. On a busy 2-core machine a single round says little; the spread says how
 * much the median can be trusted.
 */
import type { Measure } from "./types.js";

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Whether the median meets the target. */
export function meets(m: Measure): boolean {
  const value = median(m.rounds);
  return m.atLeast ? value >= m.target : value <= m.target;
}

const fmt = (v: number) =>
  Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2);

/** "name: 312 ms median of 5 (290–340, ±8 %) · target ≤ 350 ms · ratio 0.89 PASS" */
export function formatMeasure(m: Measure): string {
  const value = median(m.rounds);
  const lo = Math.min(...m.rounds);
  const hi = Math.max(...m.rounds);
  const spread = value === 0 ? 0 : ((hi - lo) / 2 / Math.abs(value)) * 100;
  const ratio = m.target === 0 ? NaN : value / m.target;
  return (
    `${m.name}: ${fmt(value)} ${m.unit} median of ${m.rounds.length} ` +
    `(${fmt(lo)}–${fmt(hi)}, ±${spread.toFixed(0)} %) · ` +
    `target ${m.atLeast ? "≥" : "≤"} ${fmt(m.target)} ${m.unit} · ratio ${ratio.toFixed(2)} ` +
    (meets(m) ? "PASS" : "FAIL")
  );
}
