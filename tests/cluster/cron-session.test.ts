/**
 * A removed cron job's session goes with it in cluster mode too: its `cron:<id>` row in
 * palaver.sessions and its messages are deleted, by the instance's scheduler (CronService on
 * PgCronStore, given the instance's PgSessionStore) and by `palaver cron remove` with
 * cluster.database set (the build, as a child process). Other sessions stay.
 */
import { rm } from "node:fs/promises";
import { afterEach, describe, expect, it } from "vitest";
import type { InboundMessage } from "../../src/bus/types.js";
import { PgCronStore } from "../../src/cron/pg-store.js";
import { CRON_SESSION_PREFIX, CronService, type AddJobInput } from "../../src/cron/service.js";
import { type Database } from "../../src/db/pool.js";
import type { ChatMessage } from "../../src/llm/types.js";
import { PgSessionStore } from "../../src/sessions/pg-store.js";
import { silentLog } from "../cron/helpers.js";
import { cliFolder } from "../helpers/cli.js";
import { postgresMissing, usePostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";

const log = silentLog();
const missing = requireOrSkip(postgresMissing());

const job = (schedule: AddJobInput["schedule"]): AddJobInput => ({
  message: "water the plants",
  schedule,
  channel: "telegram",
  to: "42",
});
const exchange = (text: string): ChatMessage[] => [
  { role: "user", content: text },
  { role: "assistant", content: `done: ${text}` },
];

describe.skipIf(missing)(
  "a removed cron job's session in the cluster (real PostgreSQL)",
  { timeout: 180_000 },
  () => {
    /** database(): a fresh, migrated database and a pool on it. */
    const { migratedDatabase: database } = usePostgres();
    let dir: string | undefined;
    const services: CronService[] = [];

    /** What the database holds of a session: its row and its messages. */
    const stored = async (db: Database, key: string): Promise<{ rows: number; messages: number }> => {
      const rows = await db.query("SELECT 1 FROM palaver.sessions WHERE key = $1", [key]);
      const messages = await db.query("SELECT 1 FROM palaver.session_messages WHERE session_key = $1", [key]);
      return { rows: rows.rowCount ?? 0, messages: messages.rowCount ?? 0 };
    };

    /** An instance's scheduler with the instance's session store, not started; `published` gets its turns. */
    const scheduler = (db: Database, sessions: PgSessionStore, published: InboundMessage[]): CronService => {
      const service = new CronService({
        store: new PgCronStore({ db, instance: "instance-1", log }),
        sessions,
        bus: { publishInbound: (msg) => published.push(msg) },
        maxCatchUp: 5,
        log,
      });
      services.push(service);
      return service;
    };

    /** What the agent does with a fired job's turn: its exchange is appended to the job's session. */
    const runTurn = async (sessions: PgSessionStore, msg: InboundMessage): Promise<void> => {
      const session = await sessions.get(msg.sessionKey!);
      await sessions.append(session, exchange(msg.content));
    };

    afterEach(async () => {
      await Promise.all(services.splice(0).map((s) => s.stop()));
      if (dir) await rm(dir, { recursive: true, force: true });
      dir = undefined;
    });

    it("the scheduler deletes the job's session and messages on remove, and at the end of a one-shot job's turn", async () => {
      const { db } = await database();
      const sessions = new PgSessionStore(db, log);
      // Another instance, holding the job's session in memory.
      const other = new PgSessionStore(db, log);
      const published: InboundMessage[] = [];
      const service = scheduler(db, sessions, published);

      const chat = await sessions.get("telegram:42");
      await sessions.append(chat, exchange("a chat of its own"));
      const recurring = await service.add(job({ kind: "every", everyMs: 3_600_000 }));
      await service.run(recurring.id);
      const key = CRON_SESSION_PREFIX + recurring.id;
      expect(published.map((m) => m.sessionKey)).toEqual([key]);
      await runTurn(sessions, published[0]!);
      expect((await other.get(key)).messages).toHaveLength(2);
      expect(await stored(db, key)).toEqual({ rows: 1, messages: 2 });

      expect(await service.remove(recurring.id)).toBe(true);
      expect(await stored(db, key)).toEqual({ rows: 0, messages: 0 });
      expect((await sessions.get(key)).messages).toEqual([]);
      expect((await other.get(key)).messages).toEqual([]);
      // Only the job's session went.
      expect(await stored(db, "telegram:42")).toEqual({ rows: 1, messages: 2 });

      // A one-shot job removes itself as it fires; the session its turn then writes goes at the turn's end.
      const once = await service.add(job({ kind: "at", atMs: Date.now() + 3_600_000 }));
      await service.run(once.id);
      expect(await service.get(once.id)).toBeUndefined();
      const onceTurn = published.at(-1)!;
      expect(onceTurn.sessionKey).toBe(CRON_SESSION_PREFIX + once.id);
      await runTurn(sessions, onceTurn);
      expect(await stored(db, onceTurn.sessionKey!)).toEqual({ rows: 1, messages: 2 });
      service.turnEnded(onceTurn);
      await service.idle();
      expect(await stored(db, onceTurn.sessionKey!)).toEqual({ rows: 0, messages: 0 });
      expect(await stored(db, "telegram:42")).toEqual({ rows: 1, messages: 2 });
    });

    it("`palaver cron remove` deletes the removed job's session from the database", async () => {
      const { url, db } = await database();
      const sessions = new PgSessionStore(db, log);
      const published: InboundMessage[] = [];
      const service = scheduler(db, sessions, published);
      const fired = await service.add(job({ kind: "every", everyMs: 3_600_000 }));
      const kept = await service.add(job({ kind: "every", everyMs: 7_200_000 }));
      await service.run(fired.id);
      await service.run(kept.id);
      expect(published).toHaveLength(2);
      for (const msg of published) await runTurn(sessions, msg);
      const firedKey = CRON_SESSION_PREFIX + fired.id;
      const keptKey = CRON_SESSION_PREFIX + kept.id;
      expect(await stored(db, firedKey)).toEqual({ rows: 1, messages: 2 });

      const folder = await cliFolder("palaver-cron-session-", { PALAVER_CLUSTER__DATABASE: url });
      dir = folder.dir;
      const removed = await folder.run(["cron", "remove", fired.id]);
      expect(removed.stderr).toBe("");
      expect(removed.code).toBe(0);
      expect(removed.stdout).toContain(`Removed job ${fired.id}`);
      expect(await stored(db, firedKey)).toEqual({ rows: 0, messages: 0 });
      expect(await stored(db, keptKey)).toEqual({ rows: 1, messages: 2 });
      expect((await service.list()).map((j) => j.id)).toEqual([kept.id]);
    });
  },
);
