/**
 * A live preview that a crash cut off mid-stream (the journal still had it open at start): its
 * messages would stay half-written forever, looking like an answer. They are rewritten once to a
 * short note; the answer itself comes again with the replayed message (or from the outbox). The
 * journal keeps where the preview is, never its text, so the note replaces the text shown.
 */
import type { PreviewSurface } from "./types.js";

/** What an interrupted preview says from then on. */
export const INTERRUPTED_NOTE = "⚠️ This answer was interrupted (palaver restarted); it is sent again below.";

/** Refs of previews that vanish on their own (Telegram drafts, "d:<id>", telegram/preview.ts): nothing to edit. */
const VANISHING_REF = /^d:/;

/**
 * Rewrites the preview's last message to {@link INTERRUPTED_NOTE} and the earlier ones (parts frozen
 * at the length limit) to "…", as a finished preview leaves its leftovers. Throws what the platform
 * throws (a message deleted or too old); the caller gives up then: it is tried once.
 */
export async function interruptPreview(surface: PreviewSurface, refs: readonly string[]): Promise<void> {
  const last = refs.at(-1);
  if (last === undefined || VANISHING_REF.test(last)) return;
  await surface.edit(last, INTERRUPTED_NOTE, false);
  for (const ref of refs.slice(0, -1)) {
    if (!VANISHING_REF.test(ref)) await surface.edit(ref, "…", false);
  }
}
