/**
 * Memory search in cluster mode, against a real PostgreSQL: an instance's index finds the turns
 * other instances ran since it started (caught up with before a search), reads only what is new,
 * and starts over with a session that was cleared since.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { ChatMessage } from "../../src/llm/types.js";
import { logger } from "../../src/log.js";
import { MemoryRecall, type StoredSessions } from "../../src/recall/service.js";
import { PgSessionStore } from "../../src/sessions/pg-store.js";
import { postgresMissing, usePostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";

const log = logger("test");
const missing = requireOrSkip(postgresMissing());
const user = (content: string): ChatMessage => ({ role: "user", content });
const assistant = (content: string): ChatMessage => ({ role: "assistant", content });

describe.skipIf(missing)("memory search across the cluster (real PostgreSQL)", () => {
  const { open, migratedDatabase } = usePostgres();
  /** The test's state folder: the same index file for each searchOn() of a test (a restart). */
  let dir: string | undefined;
  const recalls: MemoryRecall[] = [];

  afterEach(async () => {
    for (const r of recalls.splice(0)) await r.close();
    if (dir) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });

  /** Two instances' session stores on one fresh database. */
  async function twoInstances(): Promise<[PgSessionStore, PgSessionStore]> {
    const { url, db } = await migratedDatabase();
    return [new PgSessionStore(db, log), new PgSessionStore(open(url), log)];
  }

  /** An instance's memory search, over its store, started; `reads` records each messagesFrom call. */
  async function searchOn(store: PgSessionStore, reads: string[] = []): Promise<MemoryRecall> {
    dir ??= await mkdtemp(join(tmpdir(), "palaver-pg-recall-"));
    const storedSessions: StoredSessions = {
      list: () => store.list(),
      messagesFrom: (key, from) => {
        reads.push(`${key}@${from}`);
        return store.messagesFrom(key, from);
      },
    };
    const made = MemoryRecall.create({
      indexPath: join(dir, "index.sqlite"),
      sessionsDir: undefined,
      archiveDir: undefined,
      storedSessions,
      // Every search catches up (the default waits 5 s between two).
      storedCheckMs: 0,
      memoryFile: join(dir, "MEMORY.md"),
      historyFile: join(dir, "HISTORY.md"),
      includeToolResults: false,
      log,
    });
    if ("missing" in made) throw new Error(made.missing);
    recalls.push(made);
    await made.start();
    return made;
  }

  const texts = async (recall: MemoryRecall, query: string) =>
    (await recall.search({ query, limit: 10 })).map((h) => h.text);

  it("indexes the database's sessions at start, and after a restart only what changed meanwhile", async () => {
    const [a, b] = await twoInstances();
    const onA = await a.get("telegram:1");
    await a.append(onA, [user("The spare key is under the aubergine pot."), assistant("Noted.")]);
    const first = await searchOn(b);
    expect((await first.search({ query: "aubergine", limit: 5 })).map((h) => h.key)).toEqual(["telegram:1"]);
    await first.close();

    await a.append(onA, [user("And the bike lock code is quokka.")]);
    const reads: string[] = [];
    const second = await searchOn(b, reads);
    expect(await texts(second, "quokka")).toEqual(["And the bike lock code is quokka."]);
    expect(reads).toEqual(["telegram:1@2"]);
  });

  it("finds what another instance's turns wrote after this one started, reading only the new messages", async () => {
    const [a, b] = await twoInstances();
    const onB = await b.get("telegram:1");
    await b.append(onB, [user("The spare key is under the aubergine pot.")]);
    const reads: string[] = [];
    const recall = await searchOn(a, reads);
    expect(await texts(recall, "aubergine")).toEqual(["The spare key is under the aubergine pot."]);

    // A turn on the other instance, after this one's index was built: no restart needed.
    await b.append(onB, [user("And the bike lock code is quokka.")]);
    reads.length = 0;
    expect(await texts(recall, "quokka")).toEqual(["And the bike lock code is quokka."]);
    expect(reads).toEqual(["telegram:1@1"]);

    // Nothing changed since: nothing is read.
    reads.length = 0;
    await texts(recall, "quokka");
    expect(reads).toEqual([]);
  });

  it("reads a session from its start again once it was cleared and began again", async () => {
    const [a, b] = await twoInstances();
    const onB = await b.get("slack:D1");
    await b.append(onB, [user("first talk one"), user("first talk two"), user("first talk three")]);
    const reads: string[] = [];
    const recall = await searchOn(a, reads);
    expect(await texts(recall, "talk")).toHaveLength(3);

    await b.clear(onB);
    await b.append(onB, [user("a new pangolin talk")]);
    reads.length = 0;
    expect(await texts(recall, "pangolin")).toEqual(["a new pangolin talk"]);
    expect(reads).toEqual(["slack:D1@3", "slack:D1@0"]);
  });
});
