/**
 * What the agent loop needs from the parts that live beside it (subagents,
 * memory consolidation; the schedule's view is cron/types.ts's ScheduleView).
 * Small interfaces so the loop does not depend on their implementations and
 * tests can leave any of them out.
 */
import type { Session } from "../sessions/session.js";

export interface SubagentControl {
  /** Cancels the subagents started from this session; returns how many were running. */
  cancelForSession(sessionKey: string): number;
  /** The subagents of this session still running. */
  listForSession(sessionKey: string): { id: string; label: string }[];
  /** Cancels every subagent (shutdown) and waits for them to settle, up to `timeoutMs`. */
  shutdown(timeoutMs: number): Promise<void>;
}

export interface MemoryArchiver {
  /**
   * Starts a background consolidation when the unconsolidated part of the
   * session has reached the memory window. Returns at once; never two at a time per session.
   */
  maybeConsolidate(session: Session): void;
  /**
   * For /new: archives every unconsolidated message into memory (waiting for a
   * running consolidation of the session first). Throws when that fails, so the
   * caller keeps the session.
   */
  archiveAll(session: Session): Promise<void>;
  /** Waits for running consolidations to finish, up to `timeoutMs` (shutdown). */
  drain(timeoutMs: number): Promise<void>;
}
