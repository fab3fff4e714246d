/**
 * What the rest of palaver needs from a session store, whatever keeps the sessions: JSONL files in
 * the workspace (store.ts, one process) or PostgreSQL (pg-store.ts, cluster mode). Both keep
 * nanobot's data: a Session's messages in order, its metadata, created/updated times and
 * last_consolidated.
 */
import type { ChatMessage } from "../llm/types.js";
import type { SavedTurn } from "./saved-turn.js";
import type { Session } from "./session.js";

export interface SessionInfo {
  key: string;
  /** The last append or metadata change. */
  updatedAt: Date;
  /** The session's file, when the store keeps files (the web reads a conversation's title from it). */
  path?: string;
  /** The content of the session's first user message, when the store has it at hand without a file. */
  firstUserContent?: ChatMessage["content"];
}

/** A session of the file store: its file is always there. */
export interface SessionFileInfo extends SessionInfo {
  path: string;
}

export interface SessionStorage {
  /** Loads the session (or an empty one), as it is stored now; one shared object per key while it is current. */
  get(key: string): Promise<Session>;
  /**
   * The messages memory let go of after a consolidation (the first `session.forgotten`), read back
   * from storage, in order: the web chat's history shows the whole conversation.
   */
  earlierMessages(session: Session): Promise<ChatMessage[]>;
  /** Forgets any copy held in memory; the next get() reads the stored session again. */
  invalidate(key: string): void;
  /**
   * Adds messages to the session in memory (stamping a timestamp on those without one) and stores
   * them after its earlier ones. The caller must not push them into session.messages itself.
   * `turn`: the turn they came from, where it may be run again on another instance (cluster mode):
   * stored with them in one write (saved-turn.ts); a store of one process may leave it out.
   */
  append(session: Session, messages: ChatMessage[], turn?: SavedTurn): Promise<void>;
  /** Stores the session's metadata, created time and last_consolidated as they are now. */
  saveMetadata(session: Session): Promise<void>;
  /** Empties the session (/new); the old conversation is archived where the store archives. */
  clear(session: Session): Promise<void>;
  /** Stores the session exactly as it is in memory (explicit compaction). */
  compact(session: Session): Promise<void>;
  /**
   * Deletes the session for good: its messages and metadata (not what clear() archived), and any
   * copy held in memory. A session that is not stored is fine. A removed cron job's session goes so.
   */
  remove(key: string): Promise<void>;
  /** Waits for every queued write (for shutdown and tests). */
  flush(): Promise<void>;
  /** Shutdown: waits for the queued writes, then lets go of what the store holds open. */
  close(): Promise<void>;
  /** Every session, most recently updated first. */
  list(): Promise<SessionInfo[]>;
  /** Whether a session is stored for this chat: `<channel>:<chatId>` or one of its threads. */
  hasChat(channel: string, chatId: string): Promise<boolean>;
  /** How many sessions are stored. */
  count(): Promise<number>;
  /**
   * For a store whose sessions are not files: the session's stored messages from position `from`
   * on, and how many it holds now (fewer than `from`: it was cleared and began again). Memory
   * search catches up with the turns other instances ran this way.
   */
  messagesFrom?(key: string, from: number): Promise<{ messages: ChatMessage[]; count: number }>;
  /**
   * Told of every append, after the messages are in the session (memory search indexes them).
   * Called synchronously: it must only take note and never throw.
   */
  onAppended: ((key: string, messages: readonly ChatMessage[]) => void) | undefined;
  /** The folder of session files, when the sessions are files (memory search reads them at start). */
  readonly sessionsDir: string | undefined;
  /** Where clear() moves an old session file, when the store has such a folder. */
  readonly archiveDir: string | undefined;
}
