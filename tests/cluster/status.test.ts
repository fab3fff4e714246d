/** `palaver status` in cluster mode: what it reads from the cluster's database, through the real CLI. */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DOCUMENT_NAMES } from "../../src/db/names.js";
import { migrate } from "../../src/db/schema.js";
import { logger } from "../../src/log.js";
import { runCli } from "../helpers/cli.js";
import { postgresMissing, usePostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";

const log = logger("test");
const missing = requireOrSkip(postgresMissing());

describe.skipIf(missing)("palaver status in cluster mode (real PostgreSQL)", () => {
  const postgres = usePostgres();
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "palaver-cluster-status-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function status(database: string) {
    const config = join(dir, "config.json");
    await writeFile(
      config,
      JSON.stringify({ agents: { defaults: { workspace: join(dir, "ws") } }, cluster: { database } }),
    );
    return runCli(["status", "--config", config], { cwd: dir, env: { HOME: dir } });
  }

  it("lists the instances alive and the turns waiting, and says so when the database does not answer", async () => {
    const url = await postgres.createDatabase();
    const db = postgres.open(url);
    expect((await status(url)).stdout).toMatch(
      /cluster\s+.*holds no cluster yet: the first gateway started creates it/,
    );
    await migrate(db, log);
    await db.query(
      `INSERT INTO palaver.instances (id, host, pid, version) VALUES ('alpha-1', 'alpha', 1, '0.1.0'), ('beta-2', 'beta', 2, '0.1.0');
       INSERT INTO palaver.instances (id, host, pid, version, seen_at) VALUES ('gone-3', 'gone', 3, '0.1.0', now() - interval '1 hour');
       INSERT INTO palaver.inbound (session_key, message, received_by, state) VALUES
         ('telegram:1', '{}', 'alpha-1', 'queued'), ('telegram:2', '{}', 'alpha-1', 'running'), ('telegram:3', '{}', 'alpha-1', 'done')`,
    );
    const shown = await status(url);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/cluster\s+2 instances alive: alpha-1, beta-2\n/);
    expect(shown.stdout).toMatch(/cluster\s+turns: 1 queued, 1 running\n/);
    expect(shown.stdout).toMatch(/cluster\s+leases: telegram: nobody, discord: nobody\n/);

    // Sessions and pairing are counted in the cluster's database, not in this host's files.
    const now = Date.now();
    await db.query(
      "INSERT INTO palaver.sessions (key, created_at, updated_at) VALUES ('telegram:1', now(), now()), ('slack:D1', now(), now())",
    );
    const pairing = {
      version: 1,
      pending: [{ code: "ABCD1234", channel: "telegram", senderId: "7", chatId: "7", createdAt: now }],
      approved: [
        {
          channel: "telegram",
          senderId: "5",
          chatId: "5",
          approvedAt: now,
          approvedBy: "cli",
          welcomed: true,
        },
      ],
    };
    await db.query("INSERT INTO palaver.documents (name, value) VALUES ($1, $2)", [
      DOCUMENT_NAMES.pairing,
      JSON.stringify(pairing),
    ]);
    const counted = await status(url);
    expect(counted.stdout).toMatch(/sessions\s+2\n/);
    expect(counted.stdout).toMatch(/pairing\s+1 approved, 1 code waiting/);
    const port = postgres.server.port;
    const down = await status(`postgres://palaver:hunter2secret@127.0.0.1:${port + 1}/none`);
    expect(down.stdout).toMatch(
      /cluster\s+postgres:\/\/palaver:\*\*\*\*@127\.0\.0\.1:\d+\/none does not answer: .*palaver doctor/,
    );
    expect(down.stdout).toMatch(/sessions\s+in the cluster's database \(see cluster\)\n/);
    expect(down.stdout + down.stderr).not.toContain("hunter2secret");
  });
});
