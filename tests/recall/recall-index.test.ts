/** The memory search service on its own: rebuilds, languages, memory_get, and ranking quality. */
import { mkdtemp, mkdir, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MemoryRecall } from "../../src/recall/service.js";
import { writeCorpus } from "../helpers/recall-corpus.js";
import { requireOrSkip } from "../helpers/requires.js";

const noSqlite = requireOrSkip(
  process.getBuiltinModule("node:sqlite")
    ? ""
    : `memory search needs node:sqlite (Node >= 22.13; this is ${process.version})`,
);

let dir: string;
let open: MemoryRecall[] = [];
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-recall-"));
  await mkdir(join(dir, "ws", "sessions", "archive"), { recursive: true });
  await mkdir(join(dir, "ws", "memory"), { recursive: true });
});
afterEach(async () => {
  for (const r of open) await r.close();
  open = [];
  await rm(dir, { recursive: true, force: true });
});

function recall(includeToolResults = false): MemoryRecall {
  const made = MemoryRecall.create({
    indexPath: join(dir, "state", "memory", "index.sqlite"),
    sessionsDir: join(dir, "ws", "sessions"),
    archiveDir: join(dir, "ws", "sessions", "archive"),
    memoryFile: join(dir, "ws", "memory", "MEMORY.md"),
    historyFile: join(dir, "ws", "memory", "HISTORY.md"),
    includeToolResults,
    log: pino({ level: "silent" }),
  });
  if ("missing" in made) throw new Error(made.missing);
  open.push(made);
  return made;
}

async function session(
  file: string,
  key: string,
  messages: { role: string; content: string }[],
): Promise<void> {
  const lines = [
    { _type: "metadata", key, metadata: {} },
    ...messages.map((m, i) => ({ ...m, timestamp: `2025-02-0${1 + (i % 9)}T10:00:00.000000` })),
  ];
  await writeFile(file, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
}

describe.skipIf(noSqlite)("memory search index", () => {
  it("rebuilds a damaged index from the files, archived sessions included, and keeps the damaged file aside", async () => {
    await session(join(dir, "ws", "sessions", "archive", "tg_1.1700000000000.jsonl"), "tg:1", [
      { role: "user", content: "Our wifi password hint is aubergine." },
    ]);
    const first = recall();
    expect((await first.search({ query: "aubergine", limit: 5 })).map((h) => h.key)).toEqual(["tg:1"]);
    await first.close();

    await writeFile(join(dir, "state", "memory", "index.sqlite"), "this is not a database".repeat(200));
    await rm(join(dir, "state", "memory", "index.sqlite-wal"), { force: true });
    const second = recall();
    const hits = await second.search({ query: "aubergine", limit: 5 });
    expect(hits.map((h) => h.text)).toEqual(["Our wifi password hint is aubergine."]);
    expect(
      (await readdir(join(dir, "state", "memory"))).some((n) => n.startsWith("index.sqlite.damaged-")),
    ).toBe(true);
  });

  it("matches without diacritics, CJK words inside sentences, and tool results only when asked", async () => {
    await session(join(dir, "ws", "sessions", "a.jsonl"), "a:1", [
      { role: "user", content: "Rendez-vous au café à Besançon avec Müller." },
      { role: "user", content: "我们下周去东京看樱花。" },
      { role: "tool", content: "exec output: zebracorn" },
    ]);
    const r = recall();
    expect((await r.search({ query: "cafe besancon", limit: 5 }))[0]?.text).toContain("Besançon");
    expect((await r.search({ query: "muller", limit: 5 }))[0]?.text).toContain("Müller");
    expect((await r.search({ query: "东京看樱花", limit: 5 }))[0]?.text).toContain("东京");
    expect((await r.search({ query: "东京", limit: 5 }))[0]?.text).toContain("樱花");
    expect(await r.search({ query: "zebracorn", limit: 5 })).toEqual([]);
    await r.close();
    await rm(join(dir, "state"), { recursive: true });
    expect((await recall(true).search({ query: "zebracorn", limit: 5 }))[0]?.role).toBe("tool");
  });

  it("memory_get's view: a message with its neighbours of the same session, refused out of scope", async () => {
    await session(
      join(dir, "ws", "sessions", "b.jsonl"),
      "b:1",
      Array.from({ length: 9 }, (_, i) => ({
        role: i % 2 ? "assistant" : "user",
        content: `message number ${i} ${i === 4 ? "needle" : ""}`,
      })),
    );
    const r = recall();
    const [hit] = await r.search({ query: "needle", limit: 1 });
    const around = await r.get(hit!.id, 2, ["b:1"]);
    expect(around?.map((d) => d.text.trim())).toEqual(
      [2, 3, 4, 5, 6].map((i) => `message number ${i}${i === 4 ? " needle" : ""}`),
    );
    expect(await r.get(hit!.id, 2, ["other:1"])).toBeUndefined();
  });

  it("recall@5 of planted facts is at least 0.95 with BM25 alone", async () => {
    const facts = await writeCorpus(join(dir, "ws", "sessions"), { sessions: 200, messages: 50, facts: 100 });
    const r = recall();
    let found = 0;
    for (const f of facts) {
      const hits = await r.search({ query: f.question, limit: 5 });
      if (hits.some((h) => h.text === f.fact && h.key === f.sessionKey)) found++;
    }
    expect(found / facts.length).toBeGreaterThanOrEqual(0.95);
  });
});
