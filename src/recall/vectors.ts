/**
 * Pure: vectors as stored in the index (normalised Float32, so cosine is a dot product) and the
 * nearest few of a stream of them.
 */

/**
 * Below this cosine a vector hit is left out: every piece has some nearest neighbour, and a query
 * about nothing in memory must still find nothing rather than the least unrelated message.
 */
export const MIN_COSINE = 0.3;

/** A vector as a BLOB: unit length, Float32 little-endian (the platform's order, as on every host palaver runs on). */
export function toBlob(vector: readonly number[]): Uint8Array {
  const norm = Math.sqrt(vector.reduce((sum, x) => sum + x * x, 0)) || 1;
  const out = new Float32Array(vector.length);
  for (let i = 0; i < vector.length; i++) out[i] = vector[i]! / norm;
  return new Uint8Array(out.buffer);
}

export function fromBlob(blob: Uint8Array): Float32Array {
  // A Float32Array view needs a 4-byte aligned offset; SQLite's buffers usually are, a copy otherwise.
  const aligned = blob.byteOffset % 4 === 0 ? blob : blob.slice();
  return new Float32Array(aligned.buffer, aligned.byteOffset, Math.floor(aligned.byteLength / 4));
}

/** The `limit` items closest to `query` with a cosine of at least `min`, best first. */
export function closestTo(
  query: Float32Array,
  items: Iterable<{ id: number; vector: Float32Array }>,
  limit: number,
  min: number,
): { id: number; score: number }[] {
  const best: { id: number; score: number }[] = [];
  for (const { id, vector } of items) {
    if (vector.length !== query.length) continue; // another model's size: never comparable
    let score = 0;
    for (let i = 0; i < query.length; i++) score += query[i]! * vector[i]!;
    if (score < min || (best.length === limit && score <= best.at(-1)!.score)) continue;
    best.push({ id, score });
    best.sort((a, b) => b.score - a.score);
    if (best.length > limit) best.pop();
  }
  return best;
}
