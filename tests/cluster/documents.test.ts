import { afterEach, describe, expect, it } from "vitest";
import * as z from "zod";
import { CHAT_RULES_DOCUMENT, FileChatRules } from "../../src/approvals/chat-rules.js";
import { DOCUMENT_NAMES, PgDocuments } from "../../src/db/documents.js";
import type { Notifier } from "../../src/db/notify.js";
import { logger } from "../../src/log.js";
import { connectionsNamed, cutConnections, postgresMissing, usePostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";
import { waitFor } from "../helpers/wait.js";

const log = logger("test");
const missing = requireOrSkip(postgresMissing());

const Counter = z.object({ version: z.literal(1), items: z.array(z.string()) });
type Counter = z.infer<typeof Counter>;
const counterOptions = {
  schema: Counter,
  empty: (): Counter => ({ version: 1, items: [] }),
  what: "the test document",
};

describe.skipIf(missing)("shared documents in PostgreSQL", () => {
  const { open, migratedDatabase, notifier } = usePostgres();
  const hubs: PgDocuments[] = [];
  const notifiers = new Map<PgDocuments, Notifier>();
  /** One instance's documents, on a pool and a notifier of its own. */
  const instance = async (url: string, refreshMs = 600_000): Promise<PgDocuments> => {
    const hub = new PgDocuments({ db: open(url), log, refreshMs });
    hubs.push(hub);
    notifiers.set(hub, notifier(url, `docs${hubs.length}`, { retryMs: 50 }));
    return hub;
  };
  /** Starts the instances' documents, each listening through its own notifier. */
  const start = (...started: PgDocuments[]) => Promise.all(started.map((h) => h.start(notifiers.get(h)!)));
  afterEach(() => {
    for (const hub of hubs.splice(0)) hub.stop();
    notifiers.clear();
  });

  it("never loses a change when two instances change the same document at once", async () => {
    const { url } = await migratedDatabase();
    const [a, b] = [await instance(url), await instance(url)];
    const docA = a.document("test.json", counterOptions);
    const docB = b.document("test.json", counterOptions);
    await start(a, b);
    const add = (doc: typeof docA, item: string) =>
      doc.update((current) => ({
        next: { ...current, items: [...current.items, item] },
        result: current.items.length,
      }));
    const seenBefore = await Promise.all(
      Array.from({ length: 20 }, (_, i) => add(i % 2 ? docB : docA, `item ${i}`)),
    );
    // Each change ran on the result of all the ones before it: every count from 0 to 19 once.
    expect([...seenBefore].sort((x, y) => x - y)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    const { rows } = await open(url).query<{ value: Counter; version: string }>(
      "SELECT value, version FROM palaver.documents WHERE name = 'test.json'",
    );
    expect([...rows[0]!.value.items].sort()).toEqual(
      Array.from({ length: 20 }, (_, i) => `item ${i}`).sort(),
    );
    expect(Number(rows[0]!.version)).toBe(21);
  });

  it("shows a change made on one instance on the other (notified, not re-read on a timer)", async () => {
    const { url } = await migratedDatabase();
    const [a, b] = [await instance(url), await instance(url)];
    const docA = a.document("test.json", counterOptions);
    const docB = b.document("test.json", counterOptions);
    await start(a, b);
    expect(docB.read().items).toEqual([]);
    const changes: number[] = [];
    docB.watch(() => changes.push(docB.version));
    await docA.update((c) => ({ next: { ...c, items: ["from a"] }, result: undefined }));
    await waitFor(() => docB.changed(), undefined, "b sees a's change");
    expect(docB.read().items).toEqual(["from a"]);
    expect(docB.changed()).toBe(false);
    expect(changes).toEqual([docB.version]);
  });

  it("re-reads on a timer, so a change whose notification was lost still arrives", async () => {
    const { url } = await migratedDatabase();
    const b = await instance(url, 100);
    const docB = b.document("test.json", counterOptions);
    await start(b);
    // Written without NOTIFY, as if the listener's connection had been down.
    await open(url).query(
      `INSERT INTO palaver.documents (name, value, version) VALUES ('test.json', '{"version":1,"items":["quiet"]}', 5)`,
    );
    await waitFor(() => docB.read().items.length === 1, undefined, "the re-read finds the row");
    expect(docB.read().items).toEqual(["quiet"]);
  });

  it("reads a row that is not valid as empty and copies it aside at the next change", async () => {
    const { url } = await migratedDatabase();
    const db = open(url);
    await db.query(
      `INSERT INTO palaver.documents (name, value) VALUES ('test.json', '{"version":7,"items":"no"}')`,
    );
    const a = await instance(url);
    const doc = a.document("test.json", counterOptions);
    await start(a);
    expect(doc.read()).toEqual({ version: 1, items: [] });
    await doc.update((c) => ({ next: { ...c, items: ["fresh"] }, result: undefined }));
    const { rows } = await db.query<{ name: string; value: unknown }>(
      "SELECT name, value FROM palaver.documents ORDER BY name",
    );
    expect(rows.map((r) => r.name)).toEqual([
      "test.json",
      expect.stringMatching(/^test\.json\.corrupt-\d+$/),
    ]);
    expect(rows[0]!.value).toEqual({ version: 1, items: ["fresh"] });
    expect(rows[1]!.value).toEqual({ version: 7, items: "no" });
  });

  it("listens again after its notifier's connection is cut, and catches up on what it missed", async () => {
    const { url } = await migratedDatabase();
    // No re-read on a timer here: what b missed reaches it by the re-read after its notifier reconnects.
    const [a, b] = [await instance(url), await instance(url)];
    const docA = a.document("test.json", counterOptions);
    const docB = b.document("test.json", counterOptions);
    await start(a, b);
    const admin = open(url);
    const listeners = () => connectionsNamed(admin, "palaver % notify");
    // Both instances' notifier connections are cut.
    expect(await cutConnections(admin, "palaver % notify")).toBe(2);
    await docA.update((c) => ({ next: { ...c, items: ["while b was away"] }, result: undefined }));
    await waitFor(() => docB.read().items.length === 1, undefined, "b catches up");
    await waitFor(async () => (await listeners()) === 2, undefined, "both listen again");
  });

  it("approval rules: a rule added on A applies on B; revoked on B (the CLI), gone on A", async () => {
    const { url } = await migratedDatabase();
    const [a, b] = [await instance(url), await instance(url)];
    const rulesA = new FileChatRules(a.document(DOCUMENT_NAMES.approvalRules, CHAT_RULES_DOCUMENT), log);
    const rulesB = new FileChatRules(b.document(DOCUMENT_NAMES.approvalRules, CHAT_RULES_DOCUMENT), log);
    await start(a, b);
    const rule = await rulesA.add({
      channel: "tg",
      chatId: "c1",
      tool: "exec",
      program: "git",
      addedBy: "ann",
    });
    await waitFor(() => rulesB.forChat("tg", "c1").length === 1, undefined, "b has the rule");
    expect(rulesB.list()).toEqual([rule]);
    expect(await rulesB.revoke(rule.id)).toBe(true);
    await waitFor(() => rulesA.list().length === 0, undefined, "a lost the rule");
    expect(await rulesA.revoke(rule.id)).toBe(false);
  });
});
