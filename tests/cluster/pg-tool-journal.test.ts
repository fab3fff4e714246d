/**
 * The tool journal in the cluster database, across instances: two agents (the real loop, runner
 * and openai SDK against FakeOpenAI), each with a PgToolJournal on its own pool, are two gateways.
 * A turn cut off on A (its instance "died") is run again on B with the same inbound row id.
 */
import * as z from "zod";
import { afterEach, describe, expect, it } from "vitest";
import { interruptedText, notRecordedText, runOnce, type CallKey } from "../../src/agent/tool-replay.js";
import { defineTool } from "../../src/agent/tools/types.js";
import type { OutboundMessage, TurnEvent } from "../../src/bus/types.js";
import { PgToolJournal } from "../../src/daemon/pg-tool-journal.js";
import { type Database } from "../../src/db/pool.js";
import { logger } from "../../src/log.js";
import { toolCall, type FakeReply, type FakeToolCall } from "../fakes/openai-server.js";
import { startHarness, type Harness } from "../helpers/agent-harness.js";
import { postgresMissing, usePostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";
import { waitFor } from "../helpers/wait.js";

const log = logger("test");
const missing = requireOrSkip(postgresMissing());

describe.skipIf(missing)("the tool journal in the cluster database (real PostgreSQL)", () => {
  const { open, createDatabase, migratedDatabase } = usePostgres();
  let harnesses: Harness[] = [];
  /** Every booking any instance made: the side effect that must happen once. */
  let bookings: string[] = [];

  /** A side-effecting tool; with `hang`, it starts (and counts) and then waits until its turn is cut off. */
  const bookTool = (hang = false) =>
    defineTool({
      name: "book_table",
      description: "Books a table.",
      parameters: z.object({ name: z.string() }),
      execute: async ({ name }, ctx) => {
        bookings.push(name);
        if (hang) {
          await new Promise((_resolve, reject) =>
            ctx.signal.addEventListener("abort", () => reject(new Error("cut off")), { once: true }),
          );
        }
        return `Booked a table for ${name}.`;
      },
    });

  /** One gateway instance: an agent whose tool journal is the database, on a pool of its own. */
  async function instance(url: string, opts: { hang?: boolean } = {}) {
    const db = open(url);
    const h = await startHarness({ agent: { toolJournal: new PgToolJournal({ db, log }) } });
    harnesses.push(h);
    h.tools.register(bookTool(opts.hang));
    const turnEnds: TurnEvent[] = [];
    h.bus.onTurn((event) => {
      if (event.kind === "turnEnd") turnEnds.push(event);
    });
    return { h, turnEnds };
  }

  /** The inbound row of a message, as the gateway's admission writes it; its id is the turn's journal id. */
  async function inboundRow(db: Database, chat: string): Promise<string> {
    const { rows } = await db.query<{ id: string }>(
      `INSERT INTO palaver.inbound (session_key, message, received_by) VALUES ($1, '{}', 'a') RETURNING id`,
      [`test:${chat}`],
    );
    return rows[0]!.id;
  }

  const calls = (...toolCalls: FakeToolCall[]): FakeReply => ({ toolCalls });
  const toolResults = (h: Harness, index: number) =>
    h.fake!.requests[index]!.body.messages.filter((m) => m.role === "tool").map((m) => m.content as string);
  const finals = (h: Harness): OutboundMessage[] => h.outbound.filter((m) => (m.kind ?? "final") === "final");

  /** Runs the turn on `h` until the LLM is asked after `steps`, then the instance dies there. */
  async function dieAfter(h: Harness, journalId: string, steps: FakeReply[]): Promise<void> {
    h.fake!.enqueue(...steps, { content: "never seen", delayMs: 60_000 });
    h.send("c1", "book it", { journalId });
    await waitFor(
      () => h.fake!.requests.length === steps.length + 1,
      10_000,
      "the LLM asked after the tools",
    );
    await h.cleanup();
    harnesses = harnesses.filter((x) => x !== h);
  }

  afterEach(async () => {
    await Promise.all(harnesses.map((h) => h.cleanup()));
    harnesses = [];
    bookings = [];
  });

  it("a call done on A is reused by B's replay of the turn, with its turn-state change; another turn runs it", async () => {
    const { url, db: admin } = await migratedDatabase();
    const turn = await inboundRow(admin, "c1");
    const same = calls(
      toolCall("message", { content: "Booking now." }),
      toolCall("book_table", { name: "Ada" }),
    );

    const a = await instance(url);
    await dieAfter(a.h, turn, [same]);
    expect(bookings).toEqual(["Ada"]);
    expect(finals(a.h).map((m) => m.content)).toEqual(["Booking now."]);
    const firstResults = toolResults(a.h, 1);

    const b = await instance(url);
    b.h.fake!.enqueue(same, { content: "All set." });
    b.h.send("c1", "book it", { journalId: turn });
    await waitFor(() => b.turnEnds.length === 1, 10_000, "B's replay ended");

    expect(bookings).toEqual(["Ada"]);
    expect(toolResults(b.h, 1)).toEqual(firstResults);
    // The message tool already wrote to the chat on A: B neither sends it again nor adds a reply.
    expect(finals(b.h)).toEqual([]);

    // The same call in another turn (another inbound row) is that turn's own: it runs.
    const other = await inboundRow(admin, "c1");
    b.h.fake!.enqueue(calls(toolCall("book_table", { name: "Ada" })), { content: "Booked again." });
    expect((await b.h.ask("c1", "and once more", { journalId: other })).content).toBe("Booked again.");
    expect(bookings).toEqual(["Ada", "Ada"]);
  });

  it("a call started on A and never finished is not run by B: B's model is told it was interrupted", async () => {
    const { url, db: admin } = await migratedDatabase();
    const turn = await inboundRow(admin, "c1");
    const book = calls(toolCall("book_table", { name: "Grace" }));

    const a = await instance(url, { hang: true });
    a.h.fake!.enqueue(book, { content: "never seen" });
    a.h.send("c1", "book it", { journalId: turn });
    await waitFor(() => bookings.length === 1, 10_000, "the booking started on A");
    await a.h.cleanup();
    harnesses = harnesses.filter((x) => x !== a.h);

    const b = await instance(url);
    b.h.fake!.enqueue(book, { content: "Please check the booking." });
    expect((await b.h.ask("c1", "book it", { journalId: turn })).content).toBe("Please check the booking.");
    expect(bookings).toEqual(["Grace"]);
    expect(toolResults(b.h, 1)).toEqual([interruptedText("book_table")]);
  });

  it("two runs of one turn at once: the call runs in only one; the other gets its recorded result", async () => {
    const { url, db: admin } = await migratedDatabase();
    const journalId = await inboundRow(admin, "c1");
    const msg = { channel: "test", senderId: "u", chatId: "c1", content: "x", journalId };
    const key: CallKey = { name: "book_table", args: '{"name":"Ada"}', n: 1 };
    // Both loaded before either ran the call: the claim in the database decides, not the loaded rows.
    const [onA, onB] = await Promise.all([
      new PgToolJournal({ db: open(url), log }).forTurn(msg),
      new PgToolJournal({ db: open(url), log }).forTurn(msg),
    ]);
    const signal = new AbortController().signal;
    const run = (name: string) => async () => {
      bookings.push(name);
      return "Booked.";
    };
    const first = await runOnce({
      record: onA!,
      key,
      turn: { sentToOriginChat: false },
      signal,
      run: run("a"),
    });
    const second = await runOnce({
      record: onB!,
      key,
      turn: { sentToOriginChat: false },
      signal,
      run: run("b"),
    });
    expect(bookings).toEqual(["a"]);
    expect([first, second]).toEqual(["Booked.", "Booked."]);
  });

  it("when the start cannot be recorded the call does not run, and the model is told", async () => {
    const { url, db: admin } = await migratedDatabase();
    const journalId = await inboundRow(admin, "c1");
    const db = open(url);
    const record = await new PgToolJournal({ db, log }).forTurn({
      channel: "test",
      senderId: "u",
      chatId: "c1",
      content: "x",
      journalId,
    });
    // The table is gone (as good as the database being unreachable, without waiting for a timeout).
    await admin.query("ALTER TABLE palaver.tool_calls RENAME TO tool_calls_away");
    const result = await runOnce({
      record: record!,
      key: { name: "book_table", args: "{}", n: 1 },
      turn: { sentToOriginChat: false },
      signal: new AbortController().signal,
      run: async () => {
        bookings.push("ran");
        return "Booked.";
      },
    });
    expect(result).toBe(notRecordedText("book_table"));
    expect(bookings).toEqual([]);
  });

  it("endTurn keeps the rows of recent and open turns and deletes those of turns ended long ago", async () => {
    const { db } = await migratedDatabase();
    const [ended, recent, open_] = [
      await inboundRow(db, "c1"),
      await inboundRow(db, "c2"),
      await inboundRow(db, "c3"),
    ];
    for (const id of [ended, recent, open_, "999999"]) {
      await db.query(
        `INSERT INTO palaver.tool_calls (inbound_id, name, args, n, state, recorded_at)
         VALUES ($1, 'book_table', '{}', 1, 'started', now() - interval '2 days')`,
        [id],
      );
    }
    await db.query(
      `UPDATE palaver.inbound SET state = 'done', done_at = now() - interval '2 days' WHERE id = $1`,
      [ended],
    );
    await db.query(`UPDATE palaver.inbound SET state = 'done', done_at = now() WHERE id = $1`, [recent]);
    await new PgToolJournal({ db, log }).endTurn(recent);
    const { rows } = await db.query<{ inbound_id: string }>(
      "SELECT inbound_id FROM palaver.tool_calls ORDER BY inbound_id",
    );
    // The turn ended two days ago and the one whose inbound row is gone are deleted.
    expect(rows.map((r) => r.inbound_id)).toEqual([recent, open_]);
  });

  it("refuses a journal id that is not an inbound row id, naming what the gateway must pass", async () => {
    const url = await createDatabase();
    const journal = new PgToolJournal({ db: open(url), log });
    await expect(
      journal.forTurn({
        channel: "test",
        senderId: "u",
        chatId: "c1",
        content: "x",
        journalId: "file-journal-id",
      }),
    ).rejects.toThrow(/must pass the palaver.inbound id/);
    expect(
      await journal.forTurn({ channel: "test", senderId: "u", chatId: "c1", content: "x" }),
    ).toBeUndefined();
  });
});
