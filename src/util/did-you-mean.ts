/**
 * "Did you mean …?" for a name that is not known: the closest known name when
 * it is near enough to be a typo (a letter missing, extra, swapped or wrong).
 */

/** Optimal string alignment distance: insertions, deletions, substitutions and adjacent swaps. */
function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[][] = Array.from({ length: rows }, (_, i) =>
    Array.from({ length: cols }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        best = Math.min(best, d[i - 2]![j - 2]! + 1);
      }
      d[i]![j] = best;
    }
  }
  return d[a.length]![b.length]!;
}

/**
 * The known name closest to `name` (case-insensitive), or undefined when none is close: at most
 * one edit for short names, two for names of six letters or more, so "olama" finds "ollama"
 * and "maxToken" finds "maxTokens" while unrelated words suggest nothing.
 */
export function didYouMean(name: string, known: Iterable<string>): string | undefined {
  const wanted = name.toLowerCase();
  const limit = wanted.length >= 6 ? 2 : 1;
  let best: { name: string; distance: number } | undefined;
  for (const candidate of known) {
    const distance = editDistance(wanted, candidate.toLowerCase());
    if (distance <= limit && (best === undefined || distance < best.distance)) {
      best = { name: candidate, distance };
    }
  }
  return best?.name;
}
