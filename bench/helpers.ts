/** Shared pieces of the benchmarks. */
export { startHarness } from "../tests/helpers/agent-harness.js";

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}
