/**
 * Vitest's global setup: dist/ built from the current sources before any test file runs, once, so
 * the child-process tests (tests/helpers/cli.ts) run the code production runs.
 */
import { ensureBuilt } from "./helpers/dist.js";

export default function setup(): void {
  const problem = ensureBuilt();
  if (problem) throw new Error(problem);
}
