/**
 * `palaver doctor` in cluster mode: the database lines against a real PostgreSQL, an address where
 * nothing listens, and a schema newer than this build's. The URL carries a password (the test
 * server trusts any) that must never show.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { formatChecks } from "../../src/cli/doctor.js";
import { migrate, SCHEMA_VERSION } from "../../src/db/schema.js";
import { databaseChecks } from "../../src/doctor/database.js";
import { runDoctor } from "../../src/doctor/doctor.js";
import type { CheckResult } from "../../src/doctor/types.js";
import { logger } from "../../src/log.js";
import { postgresMissing, usePostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";

const log = logger("test");
const missing = requireOrSkip(postgresMissing());
const PASSWORD = "s3cret-pa55";

/** The database's URL with a password in it. */
const withPassword = (url: string) => url.replace("postgres@", `postgres:${PASSWORD}@`);
const byName = (results: CheckResult[], name: string) => results.find((r) => r.name === name);
const shownNowhere = (results: CheckResult[]) => {
  expect(formatChecks(results)).not.toContain(PASSWORD);
  expect(JSON.stringify(results)).not.toContain(PASSWORD);
};

describe.skipIf(missing)("palaver doctor: the cluster database (real PostgreSQL)", () => {
  const postgres = usePostgres();
  const { open, createDatabase } = postgres;

  it("a reachable database: its round trip, its PostgreSQL version and its schema, as doctor prints them", async () => {
    const url = withPassword(await createDatabase());
    await migrate(open(url), log);
    const dir = await mkdtemp(join(tmpdir(), "palaver-doctor-db-"));
    try {
      const configPath = join(dir, "config.json");
      await writeFile(configPath, JSON.stringify({ gateway: { port: 0 }, cluster: { database: url } }));
      const results = await runDoctor({ configPath, env: { PATH: process.env.PATH, HOME: dir } });
      expect(byName(results, "database")).toMatchObject({ status: "ok" });
      expect(byName(results, "database")?.detail).toMatch(
        new RegExp(
          `postgres://postgres:\\*\\*\\*\\*@127\\.0\\.0\\.1:${postgres.server.port}/.* answers, round trip [\\d.]+ ms`,
        ),
      );
      expect(byName(results, "database version")).toMatchObject({ status: "ok" });
      expect(byName(results, "database version")?.detail).toMatch(/^PostgreSQL \d+/);
      expect(byName(results, "database schema")).toEqual({
        name: "database schema",
        status: "ok",
        detail: `version ${SCHEMA_VERSION}, this build's`,
      });
      expect(formatChecks(results)).toMatch(/OK\s+database schema/);
      shownNowhere(results);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("an empty database is fine: the first instance creates the schema", async () => {
    const url = await createDatabase();
    const results = await databaseChecks(url, log);
    const line = byName(results, "database schema");
    expect(line?.status).toBe("ok");
    expect(line?.detail).toMatch(/^not created yet: the first instance to start creates it/);
  });

  it("fails an address where nothing listens, naming the setting, without the password", async () => {
    const results = await databaseChecks(`postgres://postgres:${PASSWORD}@127.0.0.1:9/palaver`, log);
    expect(results).toHaveLength(1);
    const [line] = results;
    expect(line).toMatchObject({ name: "database", status: "fail" });
    expect(line!.detail).toMatch(
      /^postgres:\/\/postgres:\*\*\*\*@127\.0\.0\.1:9\/palaver could not be reached: .*ECONNREFUSED/,
    );
    expect(line!.fix).toMatch(/cluster\.database \(env PALAVER_CLUSTER__DATABASE\)/);
    shownNowhere(results);
  });

  it("fails a schema newer than this build's: this instance would refuse to start", async () => {
    const url = withPassword(await createDatabase());
    const db = open(url);
    await migrate(db, log);
    await db.query("UPDATE palaver.meta SET value = $1 WHERE key = 'schema_version'", [
      String(SCHEMA_VERSION + 1),
    ]);
    const results = await databaseChecks(url, log);
    const line = byName(results, "database schema");
    expect(line?.status).toBe("fail");
    expect(line?.detail).toContain(
      `version ${SCHEMA_VERSION + 1}, newer than this build understands (${SCHEMA_VERSION})`,
    );
    expect(line?.fix).toMatch(/upgrade palaver here .*docs\/cluster\.md/);
    // The database itself is fine.
    expect(byName(results, "database")?.status).toBe("ok");
    shownNowhere(results);
  });
});
