/** One benchmark's outcome, printed beside its target by bench/run.ts. */
export interface BenchResult {
  name: string;
  /** The target in words, e.g. "append to 100,000-message session ≤ 2× empty session". */
  target: string;
  /** What was measured, in words and numbers. */
  value: string;
  pass: boolean;
}
