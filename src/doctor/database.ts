/**
 * The cluster database (cluster.database, issue 36), when one is set: reachable within a bounded
 * time, the round trip timed, a PostgreSQL new enough for pg-boss (the turn queue), and a schema
 * this build can run on. Reads only; the URL is shown with its password masked, and no error text
 * shown carries it.
 */
import type { Database } from "../db/pool.js";
import type { Logger } from "../log.js";
import { maskUrlCredentials } from "../util/url-credentials.js";
import { withTimeout } from "../util/timeout.js";
import { fail, ok, warn, type CheckResult } from "./types.js";

const CONNECT_TIMEOUT_MS = 5_000;
/** The whole check, connecting included: a server that accepts and never answers cannot hang doctor. */
const CHECK_TIMEOUT_MS = 15_000;
/** pg-boss 12's README and docs/index.md: "PostgreSQL 13 or higher". */
const MIN_SERVER_VERSION = 130_000;
/** A turn makes several round trips (inbound, queue, tool journal, session, outbox): more than this per trip shows. */
const SLOW_ROUND_TRIP_MS = 50;
const ROUND_TRIPS = 3;

const WHERE = "cluster.database (env PALAVER_CLUSTER__DATABASE)";

interface Found {
  roundTripMs: number;
  serverVersionNum: number;
  serverVersion: string;
  schema: number;
}

export async function databaseChecks(url: string | undefined, log: Logger): Promise<CheckResult[]> {
  if (!url) return [];
  // Imported here: every palaver command loads this file, and only a cluster's doctor needs pg.
  const { openDatabase, shownUrl } = await import("../db/pool.js");
  const { SCHEMA_VERSION, schemaVersion } = await import("../db/schema.js");
  const shown = shownUrl(url);
  const db = openDatabase({
    url,
    applicationName: "palaver doctor",
    log,
    max: 1,
    connectTimeoutMs: CONNECT_TIMEOUT_MS,
    statementTimeoutMs: CONNECT_TIMEOUT_MS,
  });
  let found: Found;
  try {
    found = await withTimeout(inspect(db, schemaVersion), CHECK_TIMEOUT_MS, `asking ${shown}`);
  } catch (err) {
    return [
      fail(
        "database",
        `${shown} could not be reached: ${withoutSecrets(reasonOf(err), url)}`,
        `check that PostgreSQL runs and accepts connections from here, and the host, port, user, password and database name in ${WHERE}`,
      ),
    ];
  } finally {
    // Not awaited past the bound: a connection stuck half-open must not keep doctor waiting.
    await withTimeout(db.end(), CONNECT_TIMEOUT_MS, "closing the database connection").catch(() => undefined);
  }
  return [
    roundTripCheck(shown, found.roundTripMs),
    serverVersionCheck(found.serverVersionNum, found.serverVersion),
    schemaCheck(found.schema, SCHEMA_VERSION),
  ];
}

async function inspect(db: Database, schemaVersion: (db: Database) => Promise<number>): Promise<Found> {
  const { rows } = await db.query<{ num: string; version: string }>(
    "SELECT current_setting('server_version_num') AS num, current_setting('server_version') AS version",
  );
  const trips: number[] = [];
  for (let i = 0; i < ROUND_TRIPS; i++) {
    const started = performance.now();
    await db.query("SELECT 1");
    trips.push(performance.now() - started);
  }
  return {
    roundTripMs: median(trips),
    serverVersionNum: Number(rows[0]?.num ?? 0),
    serverVersion: rows[0]?.version ?? "unknown",
    schema: await schemaVersion(db),
  };
}

/** Pure: the round trip, once connected (the median of a few, so one hiccup does not decide). */
function roundTripCheck(shown: string, ms: number): CheckResult {
  const detail = `${shown} answers, round trip ${ms < 1 ? ms.toFixed(1) : Math.round(ms)} ms`;
  if (ms <= SLOW_ROUND_TRIP_MS) return ok("database", detail);
  return warn(
    "database",
    detail,
    `each turn makes several round trips to the database: above ${SLOW_ROUND_TRIP_MS} ms replies get slower; run PostgreSQL near the instances`,
  );
}

/** Pure: pg-boss 12 (the turn queue) needs PostgreSQL 13 or newer. */
function serverVersionCheck(num: number, version: string): CheckResult {
  const name = "database version";
  const shown = `PostgreSQL ${version.split(" ")[0]}`;
  if (num >= MIN_SERVER_VERSION) return ok(name, shown);
  return fail(
    name,
    `${shown}: the turn queue (pg-boss 12) needs PostgreSQL 13 or newer`,
    "upgrade the PostgreSQL server to 13 or newer (a supported major version), or point cluster.database at one",
  );
}

/** Pure: the database's schema version against this build's. */
function schemaCheck(found: number, ours: number): CheckResult {
  const name = "database schema";
  if (found === ours) return ok(name, `version ${found}, this build's`);
  if (found === 0)
    return ok(name, `not created yet: the first instance to start creates it (version ${ours})`);
  if (found < ours) {
    return warn(
      name,
      `version ${found}, older than this build's ${ours}: the first instance of this build to start migrates it`,
      "upgrade all instances together: once migrated, instances of the older palaver refuse to start (docs/cluster.md, Upgrades)",
    );
  }
  return fail(
    name,
    `version ${found}, newer than this build understands (${ours}): another instance runs a newer palaver, and this one refuses to start`,
    "upgrade palaver here to the version the other instances run (docs/cluster.md, Upgrades)",
  );
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

/** An error's words; a refused connection to a name with several addresses is an AggregateError with none. */
function reasonOf(err: unknown): string {
  if (err instanceof AggregateError && !err.message) return reasonOf(err.errors[0]);
  if (err instanceof Error) return err.message || (err as { code?: string }).code || err.name;
  return String(err);
}

/** The text with the URL's credentials masked wherever they appear: in a URL, or the password alone. */
function withoutSecrets(text: string, url: string): string {
  let out = maskUrlCredentials(text, "****");
  const password = passwordOf(url);
  for (const form of new Set([password, safeDecode(password)])) if (form) out = out.split(form).join("****");
  return out;
}

function passwordOf(url: string): string {
  try {
    return new URL(url).password;
  } catch {
    return "";
  }
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
