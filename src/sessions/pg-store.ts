/**
 * Sessions in PostgreSQL, for cluster mode (docs/cluster.md): the same data as the JSONL files of
 * store.ts (CLUSTER.md's contract): one `palaver.sessions` row per key (created/updated times,
 * nanobot's metadata object, last_consolidated) and one `palaver.session_messages` row per
 * message, seq 0.. in order, message = exactly the JSON of one message line.
 *
 * A conversation's turns run one at a time, but on any instance: the copy of a session held here
 * is checked against the database on every get() (one indexed row: its updated_at and message
 * count) and read again when another instance changed it, so a turn never starts from a stale
 * history. A session changed elsewhere is refreshed in place: everyone holding it sees the change.
 */
import type { ChatMessage } from "../llm/types.js";
import { logger, type Logger } from "../log.js";
import { inTransaction, type Database, type DatabaseClient } from "../db/pool.js";
import { PalaverError, errorMessage } from "../util/errors.js";
import { BoundedMap } from "../util/bounded-map.js";
import { KeyedQueue } from "../util/keyed-queue.js";
import { SAVED_TURN, type SavedTurn } from "./saved-turn.js";
import { Session } from "./session.js";
import type { SessionInfo, SessionStorage } from "./storage.js";
import { formatTimestamp } from "./store.js";

/** What the copy held in memory was read from: compared with the database on every get(). */
interface Stamp {
  /** Messages stored (seq runs 0..count-1); undefined: not stored at all. */
  count: number | undefined;
  updatedAt: number;
}

interface SessionRow {
  created_at: Date;
  updated_at: Date;
  metadata: Record<string, unknown> | null;
  last_consolidated: number;
  messages: ChatMessage[] | null;
}

/** Sessions held in memory at most (each is checked against the database on every get anyway). */
const DEFAULT_MAX_CACHED = 1000;

/** PostgreSQL's unique_violation: the primary key refused a second message at the same seq. */
const UNIQUE_VIOLATION = "23505";

export class PgSessionStore implements SessionStorage {
  private readonly log: Logger;
  /**
   * The sessions read lately. Forgetting one costs only a read at its next get(): every get()
   * checks the copy against the database anyway.
   */
  private readonly cache: BoundedMap<string, { session: Session; stamp: Stamp }>;
  /** Reads and writes of one session run one after the other, in the order they were asked. */
  private readonly queue = new KeyedQueue();
  onAppended: ((key: string, messages: readonly ChatMessage[]) => void) | undefined;
  /** Not files: memory search reads no session folder, web titles come from list(). */
  readonly sessionsDir = undefined;
  /** clear() keeps the old conversation in palaver.session_archive instead. */
  readonly archiveDir = undefined;

  /** `db`: the instance's pool (db/pool.ts), owned by the caller: close() leaves it open. */
  constructor(
    private readonly db: Database,
    log?: Logger,
    opts: { maxCached?: number } = {},
  ) {
    this.log = log ?? logger("sessions");
    this.cache = new BoundedMap(opts.maxCached ?? DEFAULT_MAX_CACHED);
  }

  get(key: string): Promise<Session> {
    return this.queue.run(key, async () => {
      try {
        return await this.current(key);
      } catch (err) {
        throw failure("read", key, err);
      }
    });
  }

  invalidate(key: string): void {
    this.cache.delete(key);
  }

  append(session: Session, messages: ChatMessage[], turn?: SavedTurn): Promise<void> {
    if (messages.length === 0) return Promise.resolve();
    if (turn) session.metadata[SAVED_TURN] = turn;
    const now = new Date();
    const stamp = formatTimestamp(now);
    for (const msg of messages) {
      msg.timestamp ??= stamp;
      session.messages.push(msg);
    }
    session.updatedAt = now;
    const expected = session.total - messages.length;
    const lines = messages.map((m) => JSON.stringify(m));
    this.onAppended?.(session.key, messages);
    return this.queue.run(session.key, () => this.appendRows(session, lines, expected, turn));
  }

  saveMetadata(session: Session): Promise<void> {
    session.updatedAt = new Date();
    return this.write(session, "store the metadata of", (client) => upsertRow(client, session, "all"));
  }

  /** Empties the session; what it held is kept in palaver.session_archive (as the file store's archive folder). */
  clear(session: Session): Promise<void> {
    session.messages = [];
    session.lastConsolidated = 0;
    session.updatedAt = new Date();
    return this.write(session, "clear", async (client) => {
      // Locked first, so no append of another instance lands between the copy and the delete.
      await client.query("SELECT 1 FROM palaver.sessions WHERE key = $1 FOR UPDATE", [session.key]);
      await client.query(
        `INSERT INTO palaver.session_archive
           (session_key, created_at, updated_at, metadata, last_consolidated, messages)
         SELECT s.key, s.created_at, s.updated_at, s.metadata, s.last_consolidated,
           COALESCE((SELECT json_agg(m.message ORDER BY m.seq) FROM palaver.session_messages m
                     WHERE m.session_key = s.key), '[]'::json)
         FROM palaver.sessions s WHERE s.key = $1`,
        [session.key],
      );
      await client.query("DELETE FROM palaver.session_messages WHERE session_key = $1", [session.key]);
      await upsertRow(client, session, "all");
    });
  }

  /** Replaces what is stored with the session as it is in memory (also how `palaver cluster import` stores one). */
  compact(session: Session): Promise<void> {
    if (session.forgotten > 0) {
      // Rewritten from memory, the stored session would lose the messages memory no longer holds.
      return Promise.reject(
        new PalaverError(
          `cannot compact session ${session.key}: ${session.forgotten} of its messages are only in the database`,
        ),
      );
    }
    const lines = session.messages.map((m) => JSON.stringify(m));
    return this.write(session, "rewrite", async (client) => {
      await upsertRow(client, session, "all");
      await client.query("DELETE FROM palaver.session_messages WHERE session_key = $1", [session.key]);
      await insertMessages(client, session.key, 0, lines);
    });
  }

  /**
   * Deletes the session's row (its messages go with it: ON DELETE CASCADE) after the reads and
   * writes queued before, and forgets the copy in memory (also when the delete failed: the next
   * get() reads what the database has).
   */
  remove(key: string): Promise<void> {
    return this.queue.run(key, async () => {
      try {
        await this.db.query("DELETE FROM palaver.sessions WHERE key = $1", [key]);
      } catch (err) {
        throw failure("delete", key, err);
      } finally {
        this.invalidate(key);
      }
    });
  }

  async flush(): Promise<void> {
    await this.queue.idle();
  }

  async close(): Promise<void> {
    await this.queue.idle();
  }

  async list(): Promise<SessionInfo[]> {
    const rows = await this.db.query<{ key: string; updated_at: Date; first_user: ChatMessage["content"] }>(
      `SELECT s.key, s.updated_at,
         (SELECT m.message -> 'content' FROM palaver.session_messages m
          WHERE m.session_key = s.key AND m.message ->> 'role' = 'user' ORDER BY m.seq LIMIT 1) AS first_user
       FROM palaver.sessions s ORDER BY s.updated_at DESC, s.key`,
    );
    return rows.rows.map((r) => ({
      key: r.key,
      updatedAt: r.updated_at,
      firstUserContent: r.first_user ?? null,
    }));
  }

  async hasChat(channel: string, chatId: string): Promise<boolean> {
    const key = `${channel}:${chatId}`;
    const found = await this.db.query<{ found: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM palaver.sessions WHERE key = $1 OR key LIKE $2 ESCAPE '\\') AS found`,
      [key, `${escapeLike(key)}:%`],
    );
    return found.rows[0]?.found === true;
  }

  async count(): Promise<number> {
    const found = await this.db.query<{ n: string }>("SELECT count(*) AS n FROM palaver.sessions");
    return Number(found.rows[0]?.n ?? 0);
  }

  async earlierMessages(session: Session): Promise<ChatMessage[]> {
    if (session.forgotten === 0) return [];
    const rows = await this.db.query<{ message: ChatMessage }>(
      "SELECT message FROM palaver.session_messages WHERE session_key = $1 AND seq < $2 ORDER BY seq",
      [session.key, session.forgotten],
    );
    return rows.rows.map((r) => r.message);
  }

  /** The session as stored now, never cached: what `palaver cluster export` writes (undefined: none). */
  async stored(key: string): Promise<Session | undefined> {
    const row = await readSession(this.db, key);
    return row && sessionOf(key, row);
  }

  async messagesFrom(key: string, from: number): Promise<{ messages: ChatMessage[]; count: number }> {
    const found = await this.db.query<{ n: number; messages: ChatMessage[] }>(
      `SELECT COALESCE(max(seq) + 1, 0) AS n,
         COALESCE(json_agg(message ORDER BY seq) FILTER (WHERE seq >= $2), '[]') AS messages
       FROM palaver.session_messages WHERE session_key = $1`,
      [key, from],
    );
    const row = found.rows[0];
    return { messages: row?.messages ?? [], count: row?.n ?? 0 };
  }

  // ---- internals ----

  /** The held copy when the database still has what it was read from; else read again, into the same object. */
  private async current(key: string): Promise<Session> {
    const held = this.cache.get(key);
    if (held) {
      const now = await this.db.query<{ updated_at: Date; n: number }>(
        `SELECT s.updated_at,
           COALESCE((SELECT max(seq) + 1 FROM palaver.session_messages WHERE session_key = s.key), 0) AS n
         FROM palaver.sessions s WHERE s.key = $1`,
        [key],
      );
      const row = now.rows[0];
      const same = row
        ? held.stamp.count === row.n && held.stamp.updatedAt === row.updated_at.getTime()
        : held.stamp.count === undefined;
      if (same) {
        this.cache.set(key, held); // the most recently used is forgotten last
        return held.session;
      }
    }
    const row = await readSession(this.db, key);
    const fresh = row ? sessionOf(key, row) : new Session(key);
    const stamp: Stamp = {
      count: row ? fresh.messages.length : undefined,
      updatedAt: fresh.updatedAt.getTime(),
    };
    if (!held) {
      this.cache.set(key, { session: fresh, stamp });
      return fresh;
    }
    // Changed by another instance: refreshed in place, so whoever holds the object sees it.
    Object.assign(held.session, {
      messages: fresh.messages,
      forgotten: 0,
      createdAt: fresh.createdAt,
      updatedAt: fresh.updatedAt,
      metadata: fresh.metadata,
      lastConsolidated: fresh.lastConsolidated,
    });
    held.stamp = stamp;
    this.cache.set(key, held);
    return held.session;
  }

  /**
   * One transaction: the session's row is written first, which locks it, so a second writer of
   * this key waits for us and then numbers its messages after ours; the primary key (key, seq)
   * would refuse a writer that numbered from an old count anyway.
   */
  private async appendRows(
    session: Session,
    lines: string[],
    expected: number,
    turn: SavedTurn | undefined,
  ): Promise<void> {
    const key = session.key;
    let stored: number;
    try {
      stored = await inTransaction(this.db, async (client) => {
        await upsertRow(client, session, "times");
        const from = await storedCount(client, key);
        await insertMessages(client, key, from, lines);
        // Only this key: the rest of the metadata is saveMetadata's to write.
        if (turn)
          await client.query(
            `UPDATE palaver.sessions SET metadata = jsonb_set(metadata::jsonb, '{${SAVED_TURN}}', $2::jsonb)::json
             WHERE key = $1`,
            [key, JSON.stringify(turn)],
          );
        return from;
      });
    } catch (err) {
      // Nothing of this append was stored; the next get() reads the session as the database has it.
      this.invalidate(key);
      if (isObjectWith(err, "code", UNIQUE_VIOLATION))
        throw new PalaverError(
          `session ${key}: another writer stored messages at the same place at the same time, so these ` +
            `${lines.length} message(s) were not stored; the session is read again from the database ` +
            "at its next turn (two instances ran turns of one conversation at once: check the turn queue)",
          { cause: err },
        );
      throw failure("append to", key, err);
    }
    if (stored !== expected) {
      // Another instance wrote this session since we read it: ours went after its messages, so the
      // copy in memory has them in another order. Read it again at the next get().
      this.log.warn(
        { session: key, expected, stored },
        "session changed on another instance during this turn; reading it again at the next turn",
      );
      this.invalidate(key);
      return;
    }
    this.remember(session);
  }

  /** A write of the whole session (not its messages' tail) in one transaction. */
  private write(
    session: Session,
    what: string,
    work: (client: DatabaseClient) => Promise<void>,
  ): Promise<void> {
    return this.queue.run(session.key, async () => {
      try {
        await inTransaction(this.db, work);
      } catch (err) {
        this.invalidate(session.key);
        throw failure(what, session.key, err);
      }
      this.remember(session);
    });
  }

  /**
   * After our own write, the held copy is stamped with what it holds: when another instance has
   * stored more messages meanwhile, the count differs from the database's and the next get()
   * reads the session again.
   */
  private remember(session: Session): void {
    const held = this.cache.get(session.key);
    if (held && held.session !== session) return;
    const stamp = { count: session.total, updatedAt: session.updatedAt.getTime() };
    this.cache.set(session.key, { session, stamp });
  }
}

/** The session's row and messages, read in one statement (one snapshot); undefined when there is none. */
async function readSession(db: Pick<Database, "query">, key: string): Promise<SessionRow | undefined> {
  const found = await db.query<SessionRow>(
    `SELECT s.created_at, s.updated_at, s.metadata, s.last_consolidated,
       (SELECT json_agg(m.message ORDER BY m.seq) FROM palaver.session_messages m
        WHERE m.session_key = s.key) AS messages
     FROM palaver.sessions s WHERE s.key = $1`,
    [key],
  );
  return found.rows[0];
}

function sessionOf(key: string, row: SessionRow): Session {
  const messages = row.messages ?? [];
  return new Session(key, {
    messages,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    metadata: row.metadata ?? {},
    lastConsolidated: Math.min(row.last_consolidated, messages.length),
  });
}

/**
 * Writes the session's row: a new one with everything, or on an existing one the update time
 * ("times", an append) or everything ("all": metadata, clear, compaction).
 */
async function upsertRow(client: DatabaseClient, session: Session, update: "times" | "all"): Promise<void> {
  const set =
    update === "times"
      ? "updated_at = excluded.updated_at"
      : `created_at = excluded.created_at, updated_at = excluded.updated_at,
         metadata = excluded.metadata, last_consolidated = excluded.last_consolidated`;
  await client.query(
    `INSERT INTO palaver.sessions (key, created_at, updated_at, metadata, last_consolidated)
     VALUES ($1, $2, $3, $4::json, $5)
     ON CONFLICT (key) DO UPDATE SET ${set}`,
    [
      session.key,
      session.createdAt,
      session.updatedAt,
      JSON.stringify(session.metadata),
      session.lastConsolidated,
    ],
  );
}

async function storedCount(client: DatabaseClient, key: string): Promise<number> {
  const found = await client.query<{ n: number }>(
    "SELECT COALESCE(max(seq) + 1, 0) AS n FROM palaver.session_messages WHERE session_key = $1",
    [key],
  );
  return found.rows[0]?.n ?? 0;
}

/** The message lines as given (JSON text), numbered from `from`. */
async function insertMessages(
  client: DatabaseClient,
  key: string,
  from: number,
  lines: readonly string[],
): Promise<void> {
  if (lines.length === 0) return;
  await client.query(
    `INSERT INTO palaver.session_messages (session_key, seq, message)
     SELECT $1, $2 + t.i - 1, t.line::json FROM unnest($3::text[]) WITH ORDINALITY AS t(line, i)`,
    [key, from, lines],
  );
}

function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

function isObjectWith(value: unknown, field: string, expected: unknown): boolean {
  return (
    typeof value === "object" && value !== null && (value as Record<string, unknown>)[field] === expected
  );
}

function failure(what: string, key: string, err: unknown): PalaverError {
  if (err instanceof PalaverError) return err;
  return new PalaverError(`cannot ${what} session ${key} in the cluster database: ${errorMessage(err)}`, {
    cause: err,
  });
}
