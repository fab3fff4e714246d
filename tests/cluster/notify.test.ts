/**
 * db/notify.ts against a real PostgreSQL: notifications arrive in the order they were sent, one
 * too big for NOTIFY arrives whole (through its stored row, deleted once old), and a listener
 * whose connection the server ends reconnects, LISTENs again and hears what is sent after.
 */
import { describe, expect, it } from "vitest";
import type { Notifier } from "../../src/db/notify.js";
import { cutConnections, postgresMissing, usePostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";
import { waitFor } from "../helpers/wait.js";

const missing = requireOrSkip(postgresMissing());

describe.skipIf(missing)("Notifier (real PostgreSQL)", () => {
  const postgres = usePostgres();
  const database = postgres.migratedDatabase;

  const notifier = (url: string, instance: string, keepMs?: number): Notifier =>
    postgres.notifier(url, instance, { retryMs: 50, maxRetryMs: 200, ...(keepMs ? { keepMs } : {}) });

  it("delivers small and big payloads of one sender in the order sent, each whole and once", async () => {
    const { url } = await database();
    const sender = notifier(url, "a");
    const listener = notifier(url, "b");
    const heard: string[] = [];
    await listener.listen("chat", (payload) => heard.push(payload));
    // Multi-byte text: the limit is in bytes, and 3000 "é…" characters are 9000 bytes.
    const sent = Array.from({ length: 40 }, (_, i) =>
      i % 3 === 0 ? `${i}:${"é…".repeat(1500 + i)}` : `${i}:small`,
    );
    sent.push("end");
    await Promise.all(sent.map((p) => sender.notify("chat", p)));
    await waitFor(() => heard.includes("end"), undefined, "the last payload");
    expect(heard).toEqual(sent);
  });

  it("deletes a stored payload once it is older than keepMs", async () => {
    const { url, db } = await database();
    const sender = notifier(url, "a", 300);
    const listener = notifier(url, "b");
    const heard: string[] = [];
    await listener.listen("chat", (payload) => heard.push(payload));
    const big = "x".repeat(10_000);
    await sender.notify("chat", big);
    // Heard whole: it was read from its row.
    await waitFor(() => heard.length === 1, undefined, "the big payload");
    expect(heard).toEqual([big]);
    const rows = async () => (await db.query("SELECT 1 FROM palaver.notify_payloads")).rowCount;
    await waitFor(async () => (await rows()) === 0, undefined, "the stored row to be deleted");
  });

  it("reconnects after the server ends its connection, LISTENs again and hears later notifications", async () => {
    const { url, db } = await database();
    const sender = notifier(url, "a");
    const listener = notifier(url, "b");
    const heard: string[] = [];
    let reconnects = 0;
    listener.onReconnect(() => reconnects++);
    await listener.listen("chat", (payload) => heard.push(payload));
    await sender.notify("chat", "before");
    await waitFor(() => heard.includes("before"), undefined, "the first payload");

    expect(await cutConnections(db, "palaver % notify")).toBe(2);
    await waitFor(() => reconnects === 1, undefined, "the listener to reconnect");
    await sender.notify("chat", "after");
    await sender.notify("chat", "y".repeat(9000));
    await waitFor(() => heard.length === 3, undefined, "the later payloads");
    expect(heard).toEqual(["before", "after", "y".repeat(9000)]);
  });

  it("keeps trying when the database refuses it at the start, and listens once it can", async () => {
    const { url, db } = await database();
    await db.query("CREATE ROLE late NOLOGIN");
    const listener = notifier(url.replace("postgres@", "late@"), "b");
    const heard: string[] = [];
    let reconnects = 0;
    listener.onReconnect(() => reconnects++);
    await expect(listener.listen("chat", (payload) => heard.push(payload))).rejects.toThrow(
      /not permitted to log in/,
    );
    await db.query("ALTER ROLE late LOGIN");
    await waitFor(() => reconnects === 1, undefined, "the listener to connect");
    await notifier(url, "a").notify("chat", "hello");
    await waitFor(() => heard.length === 1, undefined, "the payload");
    expect(heard).toEqual(["hello"]);
  });
});
