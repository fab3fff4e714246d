/**
 * The turn a session's newest messages came from, and what it answered, kept in the session's
 * metadata and written with those messages (cluster mode: in the append's transaction,
 * sessions/pg-store.ts). A turn run again on another instance, because the first died after
 * saving it, finds itself here: it sends the saved reply (the outbox sends it once) instead of
 * running again, so the session does not get its messages twice.
 */
export interface SavedTurn {
  id: string;
  /** The reply the turn sent; null when it sent none (its message tool wrote to the chat, or nothing to report). */
  reply: string | null;
}

/** The metadata key. */
export const SAVED_TURN = "savedTurn";

/** The saved turn `turnId`, when it is the one the session's newest messages came from. */
export function savedTurnOf(metadata: Record<string, unknown>, turnId: string): SavedTurn | undefined {
  const saved = metadata[SAVED_TURN];
  if (typeof saved !== "object" || saved === null) return undefined;
  const { id, reply } = saved as Record<string, unknown>;
  if (id !== turnId || (typeof reply !== "string" && reply !== null)) return undefined;
  return { id, reply };
}
