import { describe, expect, it } from "vitest";
import { withClusterLock } from "../../src/db/advisory.js";
import type { Database } from "../../src/db/pool.js";
import { migrate, SCHEMA_VERSION, schemaVersion } from "../../src/db/schema.js";
import { logger } from "../../src/log.js";
import { postgresMissing, usePostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";
import { waitFor } from "../helpers/wait.js";

const log = logger("test");
const missing = requireOrSkip(postgresMissing());

describe.skipIf(missing)("cluster database (real PostgreSQL)", () => {
  const postgres = usePostgres();
  const { open, createDatabase } = postgres;

  it("migrates once when three instances start together, then finds nothing to do", async () => {
    const url = await createDatabase();
    const results = await Promise.all([open(url), open(url), open(url)].map((db) => migrate(db, log)));
    expect(results.filter((r) => r.from === 0 && r.to === SCHEMA_VERSION)).toHaveLength(1);
    expect(results.filter((r) => r.from === SCHEMA_VERSION)).toHaveLength(2);
    expect(await schemaVersion(open(url))).toBe(SCHEMA_VERSION);
    const again = await migrate(open(url), log);
    expect(again).toEqual({ from: SCHEMA_VERSION, to: SCHEMA_VERSION });
  });

  it("refuses a schema newer than it knows, changing nothing", async () => {
    const url = await createDatabase();
    const db = open(url);
    await migrate(db, log);
    await db.query("UPDATE palaver.meta SET value = $1 WHERE key = 'schema_version'", [
      String(SCHEMA_VERSION + 1),
    ]);
    await expect(migrate(db, log)).rejects.toThrow(
      new RegExp(`schema version ${SCHEMA_VERSION + 1}, newer than this palaver understands`),
    );
    expect(await schemaVersion(db)).toBe(SCHEMA_VERSION + 1);
  });

  it("runs work under one cluster lock name on one instance at a time, other names alongside", async () => {
    const url = await createDatabase();
    const [a, b] = [open(url), open(url)];
    let inside = 0;
    let most = 0;
    const order: string[] = [];
    const work = (db: Database, who: string, name = "memory") =>
      withClusterLock(db, name, async () => {
        inside++;
        most = Math.max(most, inside);
        order.push(`${who} in`);
        // Hold it until the other instance is surely waiting for the lock (its query is blocked).
        await waitFor(async () => who !== "a" || (await waiting(b)) > 0, undefined, "b waits for the lock");
        order.push(`${who} out`);
        inside--;
      });
    const first = work(a, "a");
    await waitFor(() => order.includes("a in"));
    await Promise.all([first, work(b, "b")]);
    expect(most).toBe(1);
    expect(order).toEqual(["a in", "a out", "b in", "b out"]);
    // Another name is not held back by it.
    let other = false;
    await withClusterLock(a, "memory", () => withClusterLock(b, "other", async () => void (other = true)));
    expect(other).toBe(true);
  });
});

/** Connections of this pool's database waiting on an advisory lock. */
async function waiting(db: Database): Promise<number> {
  const row = await db.query<{ n: string }>(
    "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND datname = current_database()",
  );
  return Number(row.rows[0]?.n);
}
