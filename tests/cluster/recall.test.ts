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

describe.skipIf(missing)("memory search across the cluster (real PostgreSQL)", () => {
  const { open, migratedDatabase } = usePostgres();
  let dir: string;
  const recalls: MemoryRecall[] = [];

  afterEach(async () => {
    for (const r of recalls.splice(0)) await r.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** Two instances' session stores on one fresh database. */
  async function twoInstances(): Promise<[PgSessionStore, PgSessionStore]> {
    const { url, db } = await migratedDatabase();
    return [new PgSessionStore(db, log), new PgSessionStore(open(url), log)];
  }

  /** Instance A's memory search, over its store; `reads` records each messagesFrom call. */
  async function searchOn(store: PgSessionStore, reads: string[] = []): Promise<MemoryRecall> {
    dir = await mkdtemp(join(tmpdir(), "palaver-pg-recall-"));
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
