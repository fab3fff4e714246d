/** The cluster's turn queue against a real PostgreSQL: failover after an instance is killed. */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { InboundMessage } from "../../src/bus/types.js";
import { dedupeKey } from "../../src/daemon/journal.js";
import {
  blockedConversations,
  ClusterTurns,
  unblockConversation,
  type ClusterTurnsOptions,
} from "../../src/cluster/turns.js";
import { type Database } from "../../src/db/pool.js";
import { logger } from "../../src/log.js";
import { postgresMissing, usePostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";
import { waitFor } from "../helpers/wait.js";

const log = logger("test");
const missing = requireOrSkip(postgresMissing());

describe.skipIf(missing)("cluster turn queue (real PostgreSQL)", () => {
  const { migratedDatabase, open } = usePostgres();

  function instance(
    url: string,
    db: Database,
    name: string,
    runTurn: (msg: InboundMessage) => void,
    more: Partial<ClusterTurnsOptions> = {},
  ) {
    return new ClusterTurns({
      url,
      db,
      instance: name,
      log,
      turnTimeoutSeconds: 2,
      monitorIntervalSeconds: 1,
      concurrency: 2,
      runTurn,
      ...more,
    });
  }

  const message = (chatId: string, content: string, messageId: string): InboundMessage => ({
    channel: "telegram",
    senderId: "1",
    chatId,
    content,
    messageId,
  });

  it("stored(msg) waits for that message alone; stored() for every message on its way", async () => {
    const { url, db } = await migratedDatabase();
    const turns = instance(url, db, "only", () => undefined);
    const blocker = await open(url).connect();
    try {
      await turns.start();
      const held = message("9", "held", "m1");
      const free = message("8", "free", "m2");
      // Another transaction holds the held message's dedupe key: its insert waits until that ends.
      await blocker.query("BEGIN");
      await blocker.query(
        "INSERT INTO palaver.inbound (dedupe_key, session_key, message, received_by) VALUES ($1, 'x', '{}', 'test')",
        [dedupeKey(held)],
      );
      let heldStored = false;
      let allStored = false;
      void turns.enqueue(held);
      void turns.stored(held).then(() => (heldStored = true));
      void turns.stored().then(() => (allStored = true));
      void turns.enqueue(free);
      await turns.stored(free);
      expect(
        await db.query("SELECT 1 FROM palaver.inbound WHERE dedupe_key = $1", [dedupeKey(free)]),
      ).toMatchObject({
        rowCount: 1,
      });
      expect({ heldStored, allStored }).toEqual({ heldStored: false, allStored: false });

      await blocker.query("ROLLBACK");
      await waitFor(() => heldStored && allStored, undefined, "the held message stored");
      // A message not on its way (stored already) is not waited for.
      await turns.stored(held);
    } finally {
      await blocker.query("ROLLBACK").catch(() => undefined);
      blocker.release();
      await turns.stop();
    }
  });

  it("completes a turn's job only once its replies went out: the conversation's next turn waits, on any instance", async () => {
    const { url, db } = await migratedDatabase();
    const ran: string[] = [];
    let releaseReplies: () => void = () => undefined;
    const repliesOut = new Promise<void>((resolve) => (releaseReplies = resolve));
    const waitedFor: string[] = [];
    // "a" sends its replies only when the test says so (a slow platform); "b" at once.
    const a: ClusterTurns = instance(
      url,
      db,
      "a",
      (msg) => {
        ran.push(`a:${msg.content}`);
        a.handled(msg);
      },
      {
        turnTimeoutSeconds: 60,
        repliesSent: async (msg) => {
          waitedFor.push(msg.content);
          await repliesOut;
        },
      },
    );
    const b: ClusterTurns = instance(
      url,
      db,
      "b",
      (msg) => {
        ran.push(`b:${msg.content}`);
        b.handled(msg);
      },
      { turnTimeoutSeconds: 60 },
    );
    try {
      await a.start();
      await b.start();
      await a.work();
      await a.enqueue(message("9", "first", "m1"));
      await waitFor(
        () => waitedFor.length === 1,
        undefined,
        "a ran the first turn and waits for its replies",
      );
      await b.work();
      await b.enqueue(message("9", "second", "m2"));
      await b.enqueue(message("8", "other chat", "m3"));
      // Queued after "second": taken only once every older job that could run has run.
      await waitFor(() => ran.some((r) => r.endsWith(":other chat")), undefined, "another chat's turn ran");
      expect(ran.filter((r) => r.endsWith(":second"))).toEqual([]);
      const first = await db.query<{ state: string }>(
        "SELECT state FROM palaver.inbound WHERE message->>'content' = 'first'",
      );
      expect(first.rows[0]?.state).toBe("running");

      releaseReplies();
      await waitFor(() => ran.some((r) => r.endsWith(":second")), undefined, "the next turn ran");
      expect(ran.filter((r) => !r.endsWith(":other chat"))).toEqual([
        "a:first",
        expect.stringMatching(/:second$/),
      ]);
    } finally {
      releaseReplies();
      await a.stop();
      await b.stop();
    }
  });

  it("gives the turn of a killed instance to another after the turn timeout, under the same turn id", async () => {
    const { url, db } = await migratedDatabase();
    const ran: InboundMessage[] = [];
    const survivor = instance(url, db, "survivor", (msg) => {
      ran.push(msg);
      survivor.handled(msg);
    });
    const child = spawn(
      process.execPath,
      ["--import", "tsx", join(import.meta.dirname, "fixtures", "turn-worker.ts"), url],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    const exited = new Promise((resolve) => child.once("exit", resolve));
    try {
      await survivor.start();
      await waitFor(() => out.includes("working"), 60_000, "the doomed worker works the queue");
      await survivor.enqueue({
        channel: "telegram",
        senderId: "1",
        chatId: "9",
        content: "hello",
        messageId: "m1",
      });
      await waitFor(() => out.includes("running"), undefined, "the doomed worker took the turn");
      const [, turnId] = /running (\S+) hello/.exec(out)!;
      child.kill("SIGKILL");
      await exited;

      await survivor.work();
      await waitFor(() => ran.length === 1, undefined, "the survivor ran the turn");
      expect(ran[0]).toMatchObject({ content: "hello", turnId });
      await waitFor(
        async () => {
          const row = await db.query<{ state: string; starts: number }>(
            "SELECT state, starts FROM palaver.inbound",
          );
          return row.rows[0]?.state === "done" && row.rows[0].starts === 2;
        },
        undefined,
        "the message marked answered after two starts",
      );
      // The same update delivered again later: refused, nothing runs.
      await survivor.enqueue({
        channel: "telegram",
        senderId: "1",
        chatId: "9",
        content: "hello",
        messageId: "m1",
      });
      await survivor.enqueue({
        channel: "telegram",
        senderId: "1",
        chatId: "9",
        content: "after",
        messageId: "m2",
      });
      await waitFor(() => ran.length === 2, undefined, "the next message ran");
      expect(ran.map((m) => m.content)).toEqual(["hello", "after"]);
    } finally {
      child.kill("SIGKILL");
      await survivor.stop();
    }
  });

  it("a turn that fails every retry blocks only its conversation, until unblocked", async () => {
    const { url, db } = await migratedDatabase();
    let poisoned = true;
    const ran: string[] = [];
    const turns = instance(url, db, "only", (msg) => {
      if (msg.content === "poison" && poisoned) throw new Error("this turn always fails");
      ran.push(msg.content);
      turns.handled(msg);
    });
    try {
      await turns.start();
      await turns.work();
      const from = (chatId: string, content: string, messageId: string) =>
        turns.enqueue({ channel: "telegram", senderId: "1", chatId, content, messageId });
      await from("1", "poison", "p");
      await from("1", "after the poison", "a");
      await from("2", "another chat", "o");
      await waitFor(
        async () => (await blockedConversations(db)).includes("telegram:1"),
        undefined,
        "blocked",
      );
      await waitFor(() => ran.includes("another chat"), undefined, "the other chat goes on");
      expect(ran).not.toContain("after the poison");
      expect(await blockedConversations(db)).toEqual(["telegram:1"]);

      poisoned = false;
      expect(await unblockConversation(db, "telegram:1", false)).toBe(1);
      await waitFor(() => ran.includes("after the poison"), undefined, "the conversation goes on");
      expect(ran.filter((c) => c !== "another chat")).toEqual(["poison", "after the poison"]);
      expect(await blockedConversations(db)).toEqual([]);
      expect(await unblockConversation(db, "telegram:1", false)).toBe(0);
    } finally {
      await turns.stop();
    }
  });
});
