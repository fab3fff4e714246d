/**
 * `palaver cluster import|export` against a real PostgreSQL: a state folder and workspace go into
 * the database and come back out as the same files (sessions byte for byte), through the
 * functions and through the CLI's real entry (the build, dist/main.js).
 */
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { importState, exportState, type StateFiles } from "../../src/cli/cluster-transfer.js";
import { approvalRulesPath, cronStorePath, openQuestionsPath, stateDir } from "../../src/config/paths.js";
import { parseStore } from "../../src/cron/store.js";
import type { ChatMessage } from "../../src/llm/types.js";
import { logger } from "../../src/log.js";
import { pairingPath } from "../../src/pairing/store.js";
import { PgSessionStore } from "../../src/sessions/pg-store.js";
import { SessionStore, sessionsDirOf } from "../../src/sessions/store.js";
import { runCli, type CliResult } from "../helpers/cli.js";
import { postgresMissing, usePostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";

const log = logger("test");
const missing = requireOrSkip(postgresMissing());
const NANOBOT_FILE = join(
  import.meta.dirname,
  "..",
  "fixtures",
  "nanobot",
  "sessions",
  "telegram_12345.jsonl",
);

const JOBS = {
  version: 1,
  jobs: [
    {
      id: "water1",
      name: "water the plants",
      enabled: true,
      schedule: { kind: "every", everyMs: 3_600_000 },
      payload: {
        kind: "agent_turn",
        message: "water the plants",
        deliver: true,
        channel: "telegram",
        to: "42",
      },
      state: { nextRunAtMs: 1_800_000_000_000, lastRunAtMs: null, lastStatus: null, lastError: null },
      createdAtMs: 1_700_000_000_000,
      updatedAtMs: 1_700_000_000_000,
      deleteAfterRun: false,
    },
  ],
};
const PAIRING = {
  version: 1,
  pending: [],
  approved: [
    { channel: "telegram", senderId: "7", chatId: "7", approvedAt: 1, approvedBy: "cli", welcomed: true },
  ],
};
const RULES = {
  version: 1,
  rules: [
    { id: "r1", channel: "slack", chatId: "C1", tool: "exec", program: "ls", addedBy: "u", addedAt: 2 },
  ],
};
const OPEN = { version: 1, open: [] };

/** Where a config at `<root>/state/config.json` with workspace `<root>/ws` keeps everything. */
function layout(root: string): StateFiles & { configPath: string; workspace: string } {
  const configPath = join(root, "state", "config.json");
  const workspace = join(root, "ws");
  return {
    configPath,
    workspace,
    sessionsDir: sessionsDirOf(workspace),
    cronPath: cronStorePath(configPath),
    documents: [
      { name: "pairing.json", path: pairingPath(stateDir(configPath)) },
      { name: "approval-rules.json", path: approvalRulesPath(configPath) },
      { name: "open-questions.json", path: openQuestionsPath(configPath) },
    ],
  };
}

async function writeJson(path: string, value: unknown): Promise<void> {
  await mkdir(join(path, ".."), { recursive: true });
  await writeFile(path, `${JSON.stringify(value, null, 2)}\n`);
}

/**
 * A state folder and workspace as one palaver process leaves them: sessions the file store wrote
 * (rewritten into its one-metadata-line form, as compaction and /new do), one /new archived, the
 * nanobot fixture as nanobot wrote it, cron jobs and the state files.
 */
async function oneProcess(root: string): Promise<ReturnType<typeof layout>> {
  const at = layout(root);
  const files = new SessionStore(at.sessionsDir, log, { archiveDir: join(at.sessionsDir, "archive") });
  const web = await files.get("web:abc");
  const call: ChatMessage = {
    role: "assistant",
    content: null,
    tool_calls: [{ id: "c1", type: "function", function: { name: "exec", arguments: '{"command":"ls"}' } }],
    reasoning_content: "list it",
  };
  await files.append(web, [
    { role: "user", content: [{ type: "text", text: "what is here? ünïcödé 👍" }] },
    call,
    { role: "tool", tool_call_id: "c1", name: "exec", content: "a\nb" },
    { role: "assistant", content: "Two files." },
  ]);
  web.metadata = { title: "files", plan: { steps: ["a"], done: 1 } };
  web.lastConsolidated = 2;
  await files.saveMetadata(web);
  await files.compact(web);
  const thread = await files.get("slack:C1:1700.1");
  await files.append(thread, [{ role: "user", content: "in a thread" }]);
  await files.compact(thread);
  const ended = await files.get("telegram:9");
  await files.append(ended, [{ role: "user", content: "before /new" }]);
  await files.compact(ended);
  await files.clear(ended); // archived, and telegram_9.jsonl is now just a metadata line
  await files.close();
  await copyFile(NANOBOT_FILE, join(at.sessionsDir, "telegram_12345.jsonl"));
  await writeJson(at.cronPath, JOBS);
  expect(parseStore(await readFile(at.cronPath, "utf8"))).toMatchObject({ ok: true, problems: [] });
  await writeJson(at.documents[0]!.path, PAIRING);
  await writeJson(at.documents[1]!.path, RULES);
  await writeJson(at.documents[2]!.path, OPEN);
  return at;
}

/** Every file under `dir`, relative path → bytes. */
async function tree(dir: string): Promise<Map<string, Buffer>> {
  const out = new Map<string, Buffer>();
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    out.set(path.slice(dir.length + 1), await readFile(path));
  }
  return out;
}

describe.skipIf(missing)("palaver cluster import/export (real PostgreSQL)", () => {
  const { open, createDatabase, migratedDatabase } = usePostgres();
  let root: string;

  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), "palaver-transfer-"));
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("round trip: the sessions palaver wrote come back byte for byte, nanobot's as the file store rewrites it", async () => {
    const from = await oneProcess(join(root, "from"));
    const { db } = await migratedDatabase();
    const first = await importState(db, from, { force: false, log });
    expect(first.applied).toBe(true);
    expect(first.items.filter((i) => i.outcome !== "imported")).toEqual([]);
    const whats = first.items.map((i) => i.what).sort();
    expect(whats.filter((w) => !w.startsWith("archived"))).toEqual([
      "cron job water1",
      "document approval-rules.json",
      "document open-questions.json",
      "document pairing.json",
      "session slack:C1:1700.1",
      "session telegram:12345",
      "session telegram:9",
      "session web:abc",
    ]);
    expect(whats.filter((w) => w.startsWith("archived"))).toEqual([
      expect.stringMatching(/^archived session telegram:9 of \d{4}-\d{2}-\d{2}T/),
    ]);

    const to = layout(join(root, "to"));
    const written = await exportState(db, to, { force: false, log });
    expect(written).toHaveLength(9);
    const before = await tree(from.sessionsDir);
    const after = await tree(to.sessionsDir);
    expect([...after.keys()].sort()).toEqual([...before.keys()].sort());
    for (const [name, bytes] of before) {
      if (name === "telegram_12345.jsonl") continue;
      expect(after.get(name)?.toString("utf8"), name).toBe(bytes.toString("utf8"));
    }
    // nanobot's own file (Python's spacing, microseconds, a second metadata line) comes back as
    // palaver's file store writes that session when it rewrites it.
    const rewritten = new SessionStore(join(root, "rewrite"), log);
    const nanobot = await new SessionStore(from.sessionsDir, log).get("telegram:12345");
    await rewritten.compact(nanobot);
    await rewritten.close();
    expect(after.get("telegram_12345.jsonl")?.toString("utf8")).toBe(
      await readFile(join(root, "rewrite", "telegram_12345.jsonl"), "utf8"),
    );
    // The state files hold the same values.
    expect(parseStore(await readFile(to.cronPath, "utf8"))).toMatchObject({
      ok: true,
      snapshot: { jobs: [JOBS.jobs[0]] },
    });
    expect(JSON.parse(await readFile(to.documents[0]!.path, "utf8"))).toEqual(PAIRING);
    expect(JSON.parse(await readFile(to.documents[1]!.path, "utf8"))).toEqual(RULES);
    expect(JSON.parse(await readFile(to.documents[2]!.path, "utf8"))).toEqual(OPEN);

    // Importing the export changes nothing.
    const again = await importState(db, to, { force: false, log });
    expect(again.items.filter((i) => i.outcome !== "unchanged")).toEqual([]);
    // And what the gateway reads from the database is what it read from the files.
    const fromDb = await new PgSessionStore(db, log).get("web:abc");
    const fromFile = await new SessionStore(from.sessionsDir, log).get("web:abc");
    expect(fromDb.messages).toEqual(fromFile.messages);
    expect(fromDb.metadata).toEqual(fromFile.metadata);
    expect(fromDb.lastConsolidated).toBe(2);
  });

  it("refuses to replace a session that differs, changing nothing, until --force", async () => {
    const from = await oneProcess(join(root, "from"));
    const { db } = await migratedDatabase();
    await importState(db, from, { force: false, log });
    const store = new PgSessionStore(db, log);
    const session = await store.get("web:abc");
    await store.append(session, [{ role: "user", content: "said in the cluster" }]);
    await writeJson(from.cronPath, { ...JOBS, jobs: [{ ...JOBS.jobs[0], name: "renamed" }] });

    const refused = await importState(db, from, { force: false, log });
    expect(refused.applied).toBe(false);
    expect(refused.items.filter((i) => i.outcome === "conflict").map((i) => i.what)).toEqual([
      "session web:abc",
      "cron job water1",
    ]);
    store.invalidate("web:abc");
    expect((await store.get("web:abc")).messages.at(-1)?.content).toBe("said in the cluster");
    const job = await db.query<{ job: { name: string } }>("SELECT job FROM palaver.cron_jobs");
    expect(job.rows[0]!.job.name).toBe("water the plants");

    const forced = await importState(db, from, { force: true, log });
    expect(forced.items.filter((i) => i.outcome === "replaced").map((i) => i.what)).toEqual([
      "session web:abc",
      "cron job water1",
    ]);
    store.invalidate("web:abc");
    expect((await store.get("web:abc")).messages.at(-1)?.content).toBe("Two files.");
  });

  it("bad input: a state file that is not JSON stops the import before anything is written; a bad cron entry is skipped with why", async () => {
    const from = await oneProcess(join(root, "from"));
    const { db } = await migratedDatabase();
    await writeFile(from.documents[0]!.path, "{ not json");
    await expect(importState(db, from, { force: false, log })).rejects.toThrow(
      new RegExp(
        `cannot import ${from.documents[0]!.path}: not JSON .*fix or move the file, then import again`,
      ),
    );
    const stored = await db.query<{ n: string }>("SELECT count(*) AS n FROM palaver.sessions");
    expect(Number(stored.rows[0]!.n)).toBe(0);

    await writeJson(from.documents[0]!.path, PAIRING);
    await writeJson(from.cronPath, {
      ...JOBS,
      jobs: [...JOBS.jobs, { id: "broken", schedule: { kind: "nope" } }],
    });
    const result = await importState(db, from, { force: false, log });
    expect(result.applied).toBe(true);
    const skipped = result.items.filter((i) => i.outcome === "skipped");
    expect(skipped.map((i) => i.what)).toEqual(["cron job broken"]);
    expect(skipped[0]!.detail).toMatch(/^not a valid job in .*jobs\.json \(schedule/);
    expect(result.items.find((i) => i.what === "cron job water1")?.outcome).toBe("imported");
  });

  describe("through the CLI", { timeout: 120_000 }, () => {
    const cli = (args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> =>
      runCli(args, {
        cwd: root,
        env: { HOME: join(root, "home"), PALAVER_LOG_LEVEL: "silent", ...env },
      });

    it("imports once, then says nothing changed; exports into a folder and not over it without --force", async () => {
      const from = await oneProcess(join(root, "from"));
      const url = await createDatabase();
      await writeJson(from.configPath, {
        agents: { defaults: { workspace: from.workspace } },
        cluster: { database: url },
      });
      const config = ["--config", from.configPath];

      const first = await cli(["cluster", "import", ...config]);
      expect(first.stderr).toBe("");
      expect(first.code).toBe(0);
      expect(first.stdout).toContain("imported  session web:abc");
      expect(first.stdout).toContain("imported  document pairing.json");
      expect(first.stdout).toContain("Imported 9, replaced 0, unchanged 0, skipped 0.");

      const second = await cli(["cluster", "import", ...config]);
      expect(second.code).toBe(0);
      expect(second.stdout).toContain("unchanged session web:abc");
      expect(second.stdout).toContain("Nothing changed: the cluster database already holds all of this.");

      const out = join(root, "out");
      const exported = await cli(["cluster", "export", ...config, "--to", out]);
      expect(exported.stderr).toBe("");
      expect(exported.code).toBe(0);
      expect(exported.stdout).toContain(`Wrote 9 file(s) into ${out}.`);
      expect(await readFile(join(out, "workspace", "sessions", "web_abc.jsonl"), "utf8")).toBe(
        await readFile(join(from.sessionsDir, "web_abc.jsonl"), "utf8"),
      );

      const over = await cli(["cluster", "export", ...config, "--to", out]);
      expect(over.code).toBe(1);
      expect(over.stderr).toMatch(/already exists; export into an empty folder \(--to\), or add --force/);
      const forced = await cli(["cluster", "export", ...config, "--to", out, "--force"]);
      expect(forced.code).toBe(0);
    });

    it("takes the database from PALAVER_CLUSTER__DATABASE, and names the key and the variable when there is none", async () => {
      const from = await oneProcess(join(root, "from"));
      await writeJson(from.configPath, { agents: { defaults: { workspace: from.workspace } } });
      const config = ["--config", from.configPath];

      const none = await cli(["cluster", "import", ...config]);
      expect(none.code).toBe(1);
      expect(none.stderr).toContain(`cluster.database is not set in ${from.configPath}`);
      expect(none.stderr).toContain("PALAVER_CLUSTER__DATABASE");

      const closed = await cli(["cluster", "import", ...config], {
        PALAVER_CLUSTER__DATABASE: "postgres://palaver:s3cret@127.0.0.1:1/palaver",
      });
      expect(closed.code).toBe(1);
      expect(closed.stderr).toContain(
        "cannot use the cluster database at postgres://palaver:****@127.0.0.1:1/palaver",
      );
      expect(closed.stderr).toContain(
        `check cluster.database in ${from.configPath} and that PostgreSQL is running`,
      );
      expect(closed.stderr).not.toContain("s3cret");

      const url = await createDatabase();
      const viaEnv = await cli(["cluster", "import", ...config], { PALAVER_CLUSTER__DATABASE: url });
      expect(viaEnv.code).toBe(0);
      expect(viaEnv.stdout).toContain("imported  session telegram:12345");

      const db = open(url);
      const found = await db.query<{ n: string }>("SELECT count(*) AS n FROM palaver.sessions");
      expect(Number(found.rows[0]!.n)).toBe(4);
    });
  });
});
