/**
 * Work done at most once per animation frame however often it is asked for: a streamed answer
 * arrives in many small deltas, and re-rendering its markdown for each would waste the frames.
 * (A hidden tab gets no frames: its stream catches up when shown, and a final renders at once.)
 */
export function perFrame(fn: () => void): { schedule(): void; cancel(): void } {
  let pending = 0;
  return {
    schedule() {
      if (pending) return;
      pending = requestAnimationFrame(() => {
        pending = 0;
        fn();
      });
    },
    cancel() {
      if (pending) cancelAnimationFrame(pending);
      pending = 0;
    },
  };
}
