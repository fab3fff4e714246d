/**
 * A small JSON document that several processes share and change: the pairing file, the approval
 * rules, the open questions. Two implementations: util/state-file.ts (a file in the state folder,
 * shared by the gateway and the CLI) and db/documents.ts (a row of palaver.documents, shared by
 * every instance of a cluster).
 *
 * Reading is synchronous (the file is stat-checked, the database row is kept in memory and
 * refreshed on change), because access checks and button presses decide at once. A change is a
 * read-modify-write that never loses another process's change; the database's is asynchronous,
 * so callers await `update` (awaiting the file's plain result costs nothing).
 */
import type { z } from "zod";

/** What a document is, for both implementations. */
export interface DocumentKind<T> {
  schema: z.ZodType<T>;
  /** The value when there is none yet (or it was moved aside). */
  empty: () => T;
  /** What it holds, for warnings: "the pairing file". */
  what: string;
  /** What starting over means, for the warning about a value that is not valid (default "empty"). */
  startsAs?: string;
}

export type DocumentChange<T, R> = (current: T) => { next?: T; result: R };

export interface SharedDocument<T> {
  /** The value as last seen (never throws: a value that cannot be read keeps the last one). */
  read(): T;
  /** True when another process changed it since it was last read or written here (for a poller). */
  changed(): boolean;
  /**
   * `change` gets the value as it is right now, everywhere, and returns the new one (or undefined to
   * write nothing) and a result. Throws when the current value cannot be read, so it is never
   * overwritten with a stale one.
   */
  update<R>(change: DocumentChange<T, R>): R | Promise<R>;
  /**
   * Calls `listener` whenever a newer value is seen (a change by anyone, this process included);
   * returns the unsubscribe. Only the database's has it: another process's change to a file is
   * seen at the next read.
   */
  watch?(listener: () => void): () => void;
}
