/** The instance registry and the shared-workspace marker, against a real PostgreSQL. */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { aliveInstances, InstanceRegistry, type InstanceInfo } from "../../src/db/instances.js";
import { type Database } from "../../src/db/pool.js";
import { checkWorkspaceMarker, MARKER_FILE } from "../../src/db/workspace-marker.js";
import { logger } from "../../src/log.js";
import { captureLog } from "../helpers/log.js";
import { postgresMissing, usePostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";
import { waitFor } from "../helpers/wait.js";

const log = logger("test");
const missing = requireOrSkip(postgresMissing());

const info = (id: string, port: number | null = 18790): InstanceInfo => ({
  id,
  host: "host-1",
  pid: 4242,
  version: "9.9.9",
  port,
});

describe.skipIf(missing)("cluster instances and workspace (real PostgreSQL)", () => {
  const { migratedDatabase } = usePostgres();
  const dirs: string[] = [];
  const registries: InstanceRegistry[] = [];

  afterEach(async () => {
    for (const r of registries.splice(0)) await r.stop().catch(() => undefined);
    for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
  });

  async function database(): Promise<Database> {
    return (await migratedDatabase()).db;
  }

  async function folder(): Promise<string> {
    const dir = await mkdtemp(join(tmpdir(), "palaver-ws-"));
    dirs.push(dir);
    return dir;
  }

  const seenAt = async (db: Database, id: string) =>
    (
      await db.query<{ seen: Date }>("SELECT seen_at AS seen FROM palaver.instances WHERE id = $1", [id])
    ).rows[0]!.seen.getTime();

  it("registers instances, keeps them alive by heartbeat, and forgets one that stopped", async () => {
    const db = await database();
    const a = new InstanceRegistry({ db, instance: info("a"), log, heartbeatMs: 50 });
    const b = new InstanceRegistry({ db, instance: info("b", null), log, heartbeatMs: 50 });
    registries.push(a, b);
    await a.register();
    await b.register();
    const alive = await aliveInstances(db);
    expect(alive.map(({ id, host, pid, version, port }) => ({ id, host, pid, version, port }))).toEqual([
      info("a"),
      info("b", null),
    ]);

    const first = await seenAt(db, "a");
    await waitFor(async () => (await seenAt(db, "a")) > first, undefined, "a's heartbeat");

    await a.stop();
    expect((await aliveInstances(db)).map((i) => i.id)).toEqual(["b"]);
    // Its heartbeat ended with it: b's goes on, a's row stays as it was left.
    const stoppedSeen = await seenAt(db, "a");
    const bSeen = await seenAt(db, "b");
    await waitFor(async () => (await seenAt(db, "b")) > bSeen, undefined, "b's next heartbeat");
    expect(await seenAt(db, "a")).toBe(stoppedSeen);

    // A killed instance leaves its row; once its heartbeat is old it no longer counts.
    await db.query("UPDATE palaver.instances SET seen_at = now() - interval '1 minute' WHERE id = 'b'");
    await b.stop();
    await db.query("UPDATE palaver.instances SET stopped_at = NULL WHERE id = 'b'");
    expect(await aliveInstances(db, 30)).toEqual([]);

    // The same id registering again (a restart) is alive again.
    const again = new InstanceRegistry({ db, instance: info("a"), log, heartbeatMs: 50 });
    registries.push(again);
    await again.register();
    expect((await aliveInstances(db)).map((i) => i.id)).toEqual(["a"]);
  });

  it("the first instance writes the workspace marker; one that sees the same folder is quiet", async () => {
    const db = await database();
    const shared = await folder();
    const first = captureLog();
    const created = await checkWorkspaceMarker(db, shared, first.log);
    expect(created.kind).toBe("created");
    const id = (await readFile(join(shared, MARKER_FILE), "utf8")).trim();
    expect(created).toEqual({ kind: "created", id });
    const second = captureLog();
    expect(await checkWorkspaceMarker(db, shared, second.log)).toEqual({ kind: "same", id });
    expect([...first.lines, ...second.lines].filter((l) => (l.level ?? 0) >= 40)).toEqual([]);
  });

  it("warns loudly when an instance sees another folder: no marker, or another cluster's", async () => {
    const db = await database();
    const shared = await folder();
    const created = await checkWorkspaceMarker(db, shared, log);
    const id = created.kind === "created" ? created.id : "";

    const local = await folder();
    const noMarker = captureLog();
    expect(await checkWorkspaceMarker(db, local, noMarker.log)).toEqual({ kind: "missing", expected: id });
    const warning = noMarker.lines.find((l) => l.level === 50)?.msg ?? "";
    expect(warning).toContain(`${join(local, MARKER_FILE)} does not exist here`);
    expect(warning).toContain("invisible to the other instances");
    expect(warning).toContain(`echo ${id} > ${join(local, MARKER_FILE)}`);
    // Nothing was written into the folder that is not the cluster's.
    await expect(readFile(join(local, MARKER_FILE), "utf8")).rejects.toThrow(/ENOENT/);

    await writeFile(join(local, MARKER_FILE), "another-cluster\n");
    const other = captureLog();
    expect(await checkWorkspaceMarker(db, local, other.log)).toEqual({
      kind: "different",
      expected: id,
      found: "another-cluster",
    });
    expect(other.lines.find((l) => l.level === 50)?.msg).toContain("holds another-cluster");
  });

  it("two instances starting together on a new cluster agree on one marker", async () => {
    const db = await database();
    const shared = await folder();
    const checks = await Promise.all([0, 1, 2].map(() => checkWorkspaceMarker(db, shared, log)));
    const id = (await readFile(join(shared, MARKER_FILE), "utf8")).trim();
    expect(
      checks.every((c) => c.kind === "created" || c.kind === "same"),
      JSON.stringify(checks),
    ).toBe(true);
    expect(new Set(checks.map((c) => ("id" in c ? c.id : null)))).toEqual(new Set([id]));
  });
});
