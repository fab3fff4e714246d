/** One benchmark's outcome, printed beside its target by bench/run.ts. */
export interface BenchResult {
  name: string;
  /** The target in words, e.g. "append to 100,000-message session ≤ 2× empty session". */
  target: string;
  /** What was measured, in words and numbers. */
  value: string;
  pass: boolean;
  /** The numbers behind it, each over several rounds (printed as median, spread, target and ratio). */
  measures?: Measure[];
}

/** One measured quantity: a value per round, judged by its median against a target. */
export interface Measure {
  /** What it is, e.g. "spawn → first getUpdates, Telegram only". */
  name: string;
  /** "ms", "MB", "%", "calls/reply" ... */
  unit: string;
  /** One value per round (at least one). */
  rounds: number[];
  target: number;
  /** The target is a floor (throughput share) rather than a ceiling (time, memory). */
  atLeast?: boolean;
}
