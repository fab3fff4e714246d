/**
 * A real PostgreSQL for the cluster tests: Debian's `postgresql` package (.ci/run installs it),
 * one throwaway server per test file in a temp folder, on a loopback port, trust auth, fsync off.
 * PostgreSQL refuses to run as root, so as root the server runs as the `postgres` user the
 * package creates. Without the binaries the tests skip with the reason (fail in CI: requires.ts).
 *
 * A test file's usual frame:
 *   const missing = requireOrSkip(postgresMissing());
 *   describe.skipIf(missing)("...", () => {
 *     const postgres = usePostgres();
 *     it("...", async () => {
 *       const { url, db } = await postgres.migratedDatabase();
 *       ...
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, afterEach, beforeAll } from "vitest";
import { Notifier, type NotifierOptions } from "../../src/db/notify.js";
import { openDatabase, type Database } from "../../src/db/pool.js";
import { migrate } from "../../src/db/schema.js";
import { logger } from "../../src/log.js";

export interface TestPostgres {
  /** postgres://postgres@127.0.0.1:<port>/postgres */
  url: string;
  port: number;
  /** A fresh, empty database on this server; its URL. */
  createDatabase(name?: string): Promise<string>;
  stop(): Promise<void>;
}

/** The folder with initdb and postgres, or undefined. */
function postgresBin(): string | undefined {
  const root = "/usr/lib/postgresql";
  if (existsSync(root)) {
    const versions = readdirSync(root)
      .filter((v) => existsSync(join(root, v, "bin", "initdb")))
      .sort((a, b) => Number(b) - Number(a));
    if (versions[0]) return join(root, versions[0], "bin");
  }
  const found = spawnSync("sh", ["-c", "command -v initdb"], { encoding: "utf8" });
  const path = found.stdout.trim();
  return found.status === 0 && path ? join(path, "..") : undefined;
}

const asRoot = process.getuid?.() === 0;

/** Why PostgreSQL cannot be started here, or undefined when it can. */
export function postgresMissing(): string | undefined {
  if (!postgresBin())
    return "PostgreSQL is not installed (apt-get install postgresql: initdb and postgres under /usr/lib/postgresql/*/bin)";
  if (asRoot && spawnSync("id", ["-u", "postgres"], { stdio: "ignore" }).status !== 0)
    return "running as root without a 'postgres' user to run the server as (the postgresql package creates it)";
  return undefined;
}

function run(bin: string, args: string[], dir: string): { status: number | null; output: string } {
  const [command, argv] = asRoot ? ["runuser", ["-u", "postgres", "--", bin, ...args]] : [bin, args];
  const result = spawnSync(command, argv, { encoding: "utf8", cwd: dir });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

/** A loopback port nothing listens on right now (the caller binds it soon after). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

async function accepts(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query("SELECT 1");
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

let databases = 0;

/** Starts a server (call postgresMissing() first); stop() kills it and removes its folder. */
export async function startPostgres(): Promise<TestPostgres> {
  const bin = postgresBin();
  if (!bin) throw new Error(postgresMissing());
  const dir = mkdtempSync(join(tmpdir(), "palaver-pg-"));
  const data = join(dir, "data");
  if (asRoot) spawnSync("chown", ["-R", "postgres:postgres", dir]);
  const init = run(
    join(bin, "initdb"),
    ["-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"],
    dir,
  );
  if (init.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed: ${init.output}`);
  }
  // A port taken between freePort() and the server's bind: try another.
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const settings = [
      ["listen_addresses", "127.0.0.1"],
      ["port", String(port)],
      ["unix_socket_directories", dir],
      ["fsync", "off"],
      ["synchronous_commit", "off"],
      ["full_page_writes", "off"],
      ["max_connections", "300"],
    ].flatMap(([k, v]) => ["-c", `${k}=${v}`]);
    const args = ["-D", data, ...settings];
    const child: ChildProcess = asRoot
      ? spawn("runuser", ["-u", "postgres", "--", join(bin, "postgres"), ...args], { stdio: "ignore" })
      : spawn(join(bin, "postgres"), args, { stdio: "ignore" });
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    let gone = false;
    void exited.then(() => (gone = true));
    const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
    const deadline = Date.now() + 60_000;
    while (!gone && Date.now() < deadline && !(await accepts(url))) {
      await new Promise((r) => setTimeout(r, 50));
    }
    if (!gone && Date.now() < deadline) {
      const stop = async (): Promise<void> => {
        if (!gone) {
          // The postmaster itself (runuser does not pass every signal on); SIGQUIT: immediate
          // shutdown, nothing of this throwaway server is worth a checkpoint.
          const pid = Number(readFileSync(join(data, "postmaster.pid"), "utf8").split("\n")[0]);
          process.kill(pid, "SIGQUIT");
          await exited;
        }
        rmSync(dir, { recursive: true, force: true });
      };
      return {
        url,
        port,
        stop,
        async createDatabase(name = `t${process.pid}_${++databases}`) {
          const admin = new pg.Client({ connectionString: url });
          await admin.connect();
          try {
            await admin.query(`CREATE DATABASE "${name}"`);
          } finally {
            await admin.end();
          }
          return `postgres://postgres@127.0.0.1:${port}/${name}`;
        },
      };
    }
    child.kill("SIGKILL");
    await exited;
    if (attempt >= 3) {
      rmSync(dir, { recursive: true, force: true });
      throw new Error("PostgreSQL did not start (three ports tried)");
    }
  }
}

/**
 * Ends, on the server, the connections to `db`'s database whose application_name is LIKE `name`
 * ("palaver a", "palaver % notify"), as a network cut or a server restart would; how many.
 */
export async function cutConnections(db: Database, name: string): Promise<number> {
  const { rowCount } = await db.query(
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE $1",
    [name],
  );
  return rowCount ?? 0;
}

/** How many connections to `db`'s database have an application_name LIKE `name`. */
export async function connectionsNamed(db: Database, name: string): Promise<number> {
  const { rows } = await db.query<{ n: string }>(
    "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE $1",
    [name],
  );
  return Number(rows[0]?.n);
}

export interface UsedPostgres {
  /** The file's server (started by the beforeAll hook). */
  readonly server: TestPostgres;
  /** A fresh, empty database on the server; its URL. */
  createDatabase: () => Promise<string>;
  /** A pool on `url`, ended after the test that opened it (afterEach): open it in a test or beforeEach. */
  open: (url: string, applicationName?: string) => Database;
  /** A fresh database with palaver's schema: its URL and the pool that migrated it. */
  migratedDatabase: () => Promise<{ url: string; db: Database }>;
  /** A Notifier on `url` (application_name "palaver <instance> notify"), closed after the test that made it. */
  notifier: (url: string, instance: string, options?: Partial<NotifierOptions>) => Notifier;
}

/**
 * One server for the tests of the describe block that calls it (inside `describe.skipIf(missing)`):
 * started before them, stopped after them. The pools open() makes end after each test, after the
 * test file's own afterEach hooks (vitest runs after-hooks in reverse order), so those can still
 * use them; the server stops after the file's own afterAll hooks likewise. Notifiers likewise.
 */
export function usePostgres(): UsedPostgres {
  const log = logger("test");
  let server: TestPostgres | undefined;
  const pools: Database[] = [];
  const notifiers: Notifier[] = [];
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });
  afterEach(async () => {
    await Promise.all(notifiers.splice(0).map((n) => n.close()));
    await Promise.all(pools.splice(0).map((p) => p.end()));
  });
  const used: UsedPostgres = {
    get server() {
      if (!server) throw new Error("usePostgres(): the server starts in beforeAll; use it in a test or hook");
      return server;
    },
    createDatabase: () => used.server.createDatabase(),
    open: (url, applicationName = "palaver test") => {
      const db = openDatabase({ url, applicationName, log });
      pools.push(db);
      return db;
    },
    migratedDatabase: async () => {
      const url = await used.createDatabase();
      const db = used.open(url);
      await migrate(db, log);
      return { url, db };
    },
    notifier: (url, instance, options) => {
      const notifier = new Notifier({ url, instance, log, ...options });
      notifiers.push(notifier);
      return notifier;
    },
  };
  return used;
}
