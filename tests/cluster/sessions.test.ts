/**
 * PgSessionStore against a real PostgreSQL: the behaviour of the file store (append, metadata,
 * clear, compact, list, hasChat, count) and what only a shared database has: two instances (two
 * stores on two pools) see each other's appends at their next get().
 */
import { describe, expect, it } from "vitest";
import { listConversations } from "../../src/channels/web/history.js";
import { type Database } from "../../src/db/pool.js";
import type { ChatMessage } from "../../src/llm/types.js";
import { logger } from "../../src/log.js";
import { PgSessionStore } from "../../src/sessions/pg-store.js";
import { savedTurnOf } from "../../src/sessions/saved-turn.js";
import { postgresMissing, usePostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";
import { waitFor } from "../helpers/wait.js";

const log = logger("test");
const missing = requireOrSkip(postgresMissing());

const user = (content: string): ChatMessage => ({ role: "user", content });
const assistant = (content: string): ChatMessage => ({ role: "assistant", content });
const contents = (messages: readonly ChatMessage[]) => messages.map((m) => m.content);

describe.skipIf(missing)("PgSessionStore (real PostgreSQL)", () => {
  const { open, migratedDatabase } = usePostgres();
  /** A fresh database and `n` stores on it, each on its own pool: `n` instances of a cluster. */
  const instances = async (n: number): Promise<{ url: string; stores: PgSessionStore[]; db: Database }> => {
    const { url, db } = await migratedDatabase();
    return { url, db, stores: Array.from({ length: n }, () => new PgSessionStore(open(url), log)) };
  };

  it("stores appends, metadata and consolidation; a new store reads them back as they were", async () => {
    const { url, stores } = await instances(1);
    const store = stores[0]!;
    const session = await store.get("telegram:42");
    expect(session.messages).toEqual([]);
    await store.append(session, [user("hi"), assistant("hello")]);
    session.metadata = { title: "Météo", plan: { steps: [1, 2] } };
    session.lastConsolidated = 1;
    await store.saveMetadata(session);
    await store.append(session, [user("again")]);

    const fresh = await new PgSessionStore(open(url), log).get("telegram:42");
    expect(contents(fresh.messages)).toEqual(["hi", "hello", "again"]);
    expect(fresh.messages.every((m) => typeof m.timestamp === "string")).toBe(true);
    expect(JSON.stringify(fresh.metadata)).toBe(JSON.stringify(session.metadata)); // key order kept
    expect(fresh.lastConsolidated).toBe(1);
    expect(fresh.createdAt.getTime()).toBe(session.createdAt.getTime());
    expect(fresh.updatedAt.getTime()).toBe(session.updatedAt.getTime());
    // One object per key while it is current.
    expect(await store.get("telegram:42")).toBe(session);
  });

  it("a session that let its consolidated messages go: earlier ones read back, appends numbered after all", async () => {
    const { stores } = await instances(2);
    const [a, b] = stores as [PgSessionStore, PgSessionStore];
    const session = await a.get("telegram:9");
    await a.append(session, [user("one"), assistant("two"), user("three"), assistant("four")]);
    session.lastConsolidated = 2;
    await a.saveMetadata(session);
    session.forgetConsolidated();
    expect(contents(session.messages)).toEqual(["three", "four"]);
    expect(contents(await a.earlierMessages(session))).toEqual(["one", "two"]);
    // Still current: the same object with its two messages in memory, and an append goes on at 4.
    expect(await a.get("telegram:9")).toBe(session);
    await a.append(session, [user("five")]);
    const other = await b.get("telegram:9");
    expect(contents(other.messages)).toEqual(["one", "two", "three", "four", "five"]);
    expect(contents(await b.earlierMessages(other))).toEqual([]);
  });

  it("keeps a message's JSON exactly, key order included", async () => {
    const { url, stores } = await instances(1);
    const store = stores[0]!;
    const session = await store.get("slack:C1");
    const call: ChatMessage = {
      role: "tool",
      tool_call_id: "call_1",
      name: "web_fetch",
      content: "Paris: ⛅️ +7°C",
      timestamp: "2025-02-01T10:00:03.100000",
    };
    await store.append(session, [user("weather?"), call]);
    const fresh = await new PgSessionStore(open(url), log).get("slack:C1");
    expect(fresh.messages.map((m) => JSON.stringify(m))).toEqual(
      session.messages.map((m) => JSON.stringify(m)),
    );
  });

  it("two instances: what one appends, the other's next get() sees, in the same session object", async () => {
    const { stores } = await instances(2);
    const [a, b] = stores as [PgSessionStore, PgSessionStore];
    const onA = await a.get("web:c1");
    await a.append(onA, [user("one"), assistant("1")]);
    const onB = await b.get("web:c1");
    expect(contents(onB.messages)).toEqual(["one", "1"]);
    // The next turn runs on b; then a turn on a again must start from b's messages.
    await b.append(onB, [user("two"), assistant("2")]);
    onB.metadata = { plan: "b's" };
    await b.saveMetadata(onB);
    const again = await a.get("web:c1");
    expect(again).toBe(onA); // refreshed in place: whoever holds it sees the change
    expect(contents(again.messages)).toEqual(["one", "1", "two", "2"]);
    expect(again.metadata).toEqual({ plan: "b's" });
    await a.append(again, [user("three")]);
    expect(contents((await b.get("web:c1")).messages)).toEqual(["one", "1", "two", "2", "three"]);
  });

  it("an append from a stale copy goes after the other instance's messages, and the copy is read again", async () => {
    const { stores } = await instances(2);
    const [a, b] = stores as [PgSessionStore, PgSessionStore];
    const onA = await a.get("test:race");
    const onB = await b.get("test:race");
    await a.append(onA, [user("from a")]);
    await b.append(onB, [user("from b")]); // b never saw a's message
    const seen = await b.get("test:race");
    expect(contents(seen.messages)).toEqual(["from a", "from b"]);
    expect(contents((await a.get("test:race")).messages)).toEqual(["from a", "from b"]);
  });

  it("the primary key refuses a second writer at the same seq: that append fails whole, names the session, and the copy is read again", async () => {
    const { db, stores } = await instances(1);
    const store = stores[0]!;
    const session = await store.get("test:pk");
    await store.append(session, [user("first")]);
    // Another writer that did not lock the session's row (not a PgSessionStore) holds seq 1 in
    // an open transaction: ours numbers from the committed count and waits on that key.
    const other = await db.connect();
    try {
      await other.query("BEGIN");
      await other.query(
        `INSERT INTO palaver.session_messages (session_key, seq, message) VALUES ('test:pk', 1, '{"role":"user","content":"other"}')`,
      );
      const appending = store.append(session, [user("a"), user("b")]);
      const failed = expect(appending).rejects.toThrow(
        /session test:pk: another writer stored messages at the same place/,
      );
      await waitFor(
        async () =>
          (await db.query("SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'")).rows.length > 0,
        undefined,
        "our insert waits for the other writer",
      );
      await other.query("COMMIT");
      await failed;
    } finally {
      other.release();
    }
    // Nothing of the failed append is stored, and the next get() reads what the database has.
    expect(contents((await store.get("test:pk")).messages)).toEqual(["first", "other"]);
  });

  it("clear empties the session and keeps the old conversation in palaver.session_archive", async () => {
    const { url, db, stores } = await instances(1);
    const store = stores[0]!;
    const session = await store.get("telegram:7");
    await store.append(session, [user("old"), assistant("answer")]);
    session.lastConsolidated = 2;
    await store.saveMetadata(session);
    await store.clear(session);
    expect(session.messages).toEqual([]);
    expect(session.lastConsolidated).toBe(0);
    await store.append(session, [user("new")]);

    const fresh = await new PgSessionStore(open(url), log).get("telegram:7");
    expect(contents(fresh.messages)).toEqual(["new"]);
    expect(fresh.lastConsolidated).toBe(0);
    const archived = await db.query<{ messages: ChatMessage[]; last_consolidated: number }>(
      "SELECT messages, last_consolidated FROM palaver.session_archive WHERE session_key = 'telegram:7'",
    );
    expect(archived.rows).toHaveLength(1);
    expect(contents(archived.rows[0]!.messages)).toEqual(["old", "answer"]);
    expect(archived.rows[0]!.last_consolidated).toBe(2);
  });

  it("compact stores the session exactly as it is in memory", async () => {
    const { url, stores } = await instances(1);
    const store = stores[0]!;
    const session = await store.get("test:compact");
    await store.append(session, [user("a"), assistant("b"), user("c")]);
    session.messages.splice(0, 2);
    session.metadata = { folded: true };
    await store.compact(session);
    const fresh = await new PgSessionStore(open(url), log).get("test:compact");
    expect(contents(fresh.messages)).toEqual(["c"]);
    expect(fresh.metadata).toEqual({ folded: true });
    await store.append(session, [assistant("d")]);
    expect(contents((await new PgSessionStore(open(url), log).get("test:compact")).messages)).toEqual([
      "c",
      "d",
    ]);
  });

  it("lists newest first with the first user message, knows chats and their threads, counts", async () => {
    const { stores } = await instances(2);
    const [a, b] = stores as [PgSessionStore, PgSessionStore];
    expect(await a.list()).toEqual([]);
    expect(await a.count()).toBe(0);
    const first = await a.get("web:first");
    await a.append(first, [{ role: "system", content: "s" }, user("title here"), assistant("ok")]);
    const thread = await a.get("slack:C9:1700.1");
    await a.append(thread, [user("in a thread")]);
    const onlyMeta = await a.get("telegram:5");
    await a.saveMetadata(onlyMeta);
    await a.get("telegram:never-written");

    const listed = await b.list();
    expect(listed.map((s) => s.key).sort()).toEqual(["slack:C9:1700.1", "telegram:5", "web:first"]);
    const times = listed.map((s) => s.updatedAt.getTime());
    expect(times).toEqual([...times].sort((x, y) => y - x));
    expect(listed[0]!.updatedAt.getTime()).toBe(onlyMeta.updatedAt.getTime());
    expect(listed.find((s) => s.key === "web:first")?.firstUserContent).toBe("title here");
    expect(listed.find((s) => s.key === "telegram:5")?.firstUserContent).toBeNull();
    // The web chat's list of conversations takes its titles from there (no file to read).
    expect(await listConversations(listed, () => false)).toEqual([
      expect.objectContaining({ id: "first", title: "title here" }),
    ]);
    expect(await b.count()).toBe(3);
    expect(await b.hasChat("web", "first")).toBe(true);
    expect(await b.hasChat("slack", "C9")).toBe(true); // through its thread
    expect(await b.hasChat("telegram", "5")).toBe(true);
    expect(await b.hasChat("telegram", "never-written")).toBe(false); // only looked up
    expect(await b.hasChat("slack", "C")).toBe(false); // a prefix of a chat id is not the chat
    expect(await b.hasChat("slack", "C%")).toBe(false); // LIKE's wildcards are taken literally
  });

  it("holds at most maxCached sessions; a forgotten one is read again whole", async () => {
    const { url } = await instances(0);
    const store = new PgSessionStore(open(url), log, { maxCached: 1 });
    const a = await store.get("test:a");
    await store.append(a, [user("a1")]);
    const b = await store.get("test:b"); // pushes test:a out
    await store.append(b, [user("b1")]);
    const again = await store.get("test:a");
    expect(again).not.toBe(a);
    expect(contents(again.messages)).toEqual(["a1"]);
    await store.append(again, [user("a2")]);
    expect(contents((await new PgSessionStore(open(url), log).get("test:a")).messages)).toEqual(["a1", "a2"]);
  });

  it("stores a turn's record with its messages, for another instance's next get, and leaves the other metadata", async () => {
    const { stores } = await instances(2);
    const [a, b] = stores as [PgSessionStore, PgSessionStore];
    const onA = await a.get("telegram:1");
    onA.metadata.agent = "helper";
    await a.saveMetadata(onA);
    await a.append(onA, [user("what is it?"), assistant("42")], { id: "turn-9", reply: "42" });
    const onB = await b.get("telegram:1");
    expect(savedTurnOf(onB.metadata, "turn-9")).toEqual({ id: "turn-9", reply: "42" });
    expect(savedTurnOf(onB.metadata, "turn-10")).toBeUndefined();
    expect(onB.metadata.agent).toBe("helper");
    expect(contents(onB.messages)).toEqual(["what is it?", "42"]);
  });

  it("tells onAppended of every append and stamps messages that have no timestamp", async () => {
    const { stores } = await instances(1);
    const store = stores[0]!;
    const told: string[] = [];
    store.onAppended = (key, messages) => told.push(`${key}:${messages.length}`);
    const session = await store.get("test:told");
    const kept = { ...user("x"), timestamp: "2025-01-01T00:00:00.000000" };
    await store.append(session, [kept, user("y")]);
    await store.flush();
    expect(told).toEqual(["test:told:2"]);
    expect(session.messages[0]!.timestamp).toBe("2025-01-01T00:00:00.000000");
    expect(session.messages[1]!.timestamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}000$/);
    expect(store.sessionsDir).toBeUndefined();
    expect(store.archiveDir).toBeUndefined();
  });

  it("stored() reads a session as stored now, and nothing for one never stored", async () => {
    const { url, stores } = await instances(2);
    const [a, b] = stores as [PgSessionStore, PgSessionStore];
    await a.append(await a.get("telegram:1"), [user("kept")]);
    expect(contents((await b.stored("telegram:1"))!.messages)).toEqual(["kept"]);
    await expect(new PgSessionStore(open(url), log).stored("telegram:none")).resolves.toBeUndefined();
  });

  it("a failing query fails the call with the session named, and nothing is cached", async () => {
    const { db } = await migratedDatabase();
    const store = new PgSessionStore(db, log);
    await db.query("ALTER TABLE palaver.session_messages RENAME TO session_messages_gone");
    await expect(store.get("test:down")).rejects.toThrow(
      /cannot read session test:down in the cluster database/,
    );
    await db.query("ALTER TABLE palaver.session_messages_gone RENAME TO session_messages");
    expect((await store.get("test:down")).messages).toEqual([]);
  });
});
