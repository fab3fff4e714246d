/**
 * db/notify.ts against a real PostgreSQL: notifications arrive in the order they were sent, one
 * too big for NOTIFY arrives whole (through its stored row, deleted once old), and a listener
 * whose connection the server ends reconnects, LISTENs again and hears what is sent after.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Notifier } from "../../src/db/notify.js";
import { openDatabase, type Database } from "../../src/db/pool.js";
import { migrate } from "../../src/db/schema.js";
import { logger } from "../../src/log.js";
import { postgresMissing, startPostgres, type TestPostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";
import { waitFor } from "../helpers/wait.js";

const log = logger("test");
const missing = requireOrSkip(postgresMissing());

describe.skipIf(missing)("Notifier (real PostgreSQL)", () => {
  let server: TestPostgres;
  const pools: Database[] = [];
  const notifiers: Notifier[] = [];

  beforeAll(async () => {
    server = await startPostgres();
  });
  afterEach(async () => {
    await Promise.all(notifiers.splice(0).map((n) => n.close()));
    await Promise.all(pools.splice(0).map((p) => p.end()));
  });
  afterAll(async () => {
    await server?.stop();
  });

  async function database(): Promise<{ url: string; db: Database }> {
    const url = await server.createDatabase();
    const db = openDatabase({ url, applicationName: "palaver test", log });
    pools.push(db);
    await migrate(db, log);
    return { url, db };
  }

  function notifier(url: string, instance: string, keepMs?: number): Notifier {
    const n = new Notifier({
      url,
      instance,
      log,
      retryMs: 50,
      maxRetryMs: 200,
      ...(keepMs ? { keepMs } : {}),
    });
    notifiers.push(n);
    return n;
  }

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

    const ended = await db.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'palaver % notify'",
    );
    expect(ended.rowCount).toBe(2);
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
