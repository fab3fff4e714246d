/**
 * `palaver cron` in cluster mode, run as real child processes (the build, dist/main.js) with
 * cluster.database set: the jobs it adds, lists, runs and removes are the cluster's rows, which an
 * instance's scheduler (a CronService on PgCronStore in this test process) sees and fires.
 */
import { existsSync } from "node:fs";
import { rm } from "node:fs/promises";
import { afterEach, describe, expect, it } from "vitest";
import type { InboundMessage } from "../../src/bus/types.js";
import { cronStorePath } from "../../src/config/paths.js";
import { PgCronStore } from "../../src/cron/pg-store.js";
import { CronService } from "../../src/cron/service.js";
import type { CronJob } from "../../src/cron/types.js";
import { silentLog } from "../cron/helpers.js";
import { cliFolder, type CliResult } from "../helpers/cli.js";
import { postgresMissing, usePostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";
import { waitFor } from "../helpers/wait.js";

const log = silentLog();
const missing = requireOrSkip(postgresMissing());

describe.skipIf(missing)("palaver cron with cluster.database (real PostgreSQL)", { timeout: 180_000 }, () => {
  const { open, createDatabase } = usePostgres();
  let dir: string;
  let instance: CronService | undefined;

  afterEach(async () => {
    await instance?.stop();
    instance = undefined;
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("adds, lists, runs and removes the cluster's jobs, which an instance's scheduler fires", async () => {
    const url = await createDatabase();
    const folder = await cliFolder("palaver-cron-cluster-cli-", { PALAVER_CLUSTER__DATABASE: url });
    dir = folder.dir;
    const cli = (args: string[]): Promise<CliResult> => folder.run(["cron", ...args]);

    const added = await cli([
      "add",
      "--message",
      "water the plants",
      "--every",
      "3600",
      "--channel",
      "telegram",
      "--to",
      "42",
      "--force",
    ]);
    expect(added.stderr).toContain("channels.telegram is not enabled");
    expect(added.code).toBe(0);
    const id = /^Added job ([0-9a-f]{8})/.exec(added.stdout)?.[1];
    expect(id).toBeDefined();
    // No gateway pid file to look for in a cluster.
    expect(added.stdout).not.toContain("The gateway is not running");
    expect(existsSync(cronStorePath(folder.configPath))).toBe(false);

    const db = open(url);
    const rows = await db.query<{ id: string; job: CronJob }>("SELECT id, job FROM palaver.cron_jobs");
    expect(rows.rows.map((r) => [r.id, r.job.payload.message, r.job.payload.to])).toEqual([
      [id, "water the plants", "42"],
    ]);

    const list = await cli(["list", "--json"]);
    expect(list.code).toBe(0);
    expect((JSON.parse(list.stdout) as CronJob[]).map((j) => j.id)).toEqual([id]);

    // An instance of the cluster; the job's first run is an hour away.
    const published: InboundMessage[] = [];
    instance = new CronService({
      store: new PgCronStore({ db, instance: "instance-1", log }),
      bus: { publishInbound: (msg) => published.push(msg) },
      maxCatchUp: 5,
      log,
      pollIntervalMs: 50,
    });
    await instance.start();
    expect(published).toHaveLength(0);

    const run = await cli(["run", id!]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`Asked the cluster to run job ${id} now`);
    await waitFor(() => published.length === 1, undefined, "the instance ran the job");
    expect(published[0]!.content).toContain("water the plants");
    const fired = await db.query<{ job_id: string; fired_by: string }>(
      "SELECT job_id, fired_by FROM palaver.cron_fired",
    );
    expect(fired.rows).toEqual([{ job_id: id, fired_by: "instance-1" }]);

    const removed = await cli(["remove", id!]);
    expect(removed.code).toBe(0);
    expect((await db.query("SELECT id FROM palaver.cron_jobs")).rowCount).toBe(0);
    const again = await cli(["remove", id!]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`no cron job with id ${id}`);
  });

  it("names cluster.database when the database cannot be reached", async () => {
    // Port 1: nothing listens there, the connection is refused at once.
    const folder = await cliFolder("palaver-cron-cluster-cli-", {
      PALAVER_CLUSTER__DATABASE: "postgres://palaver:secret@127.0.0.1:1/palaver",
    });
    dir = folder.dir;
    const result = await folder.run(["cron", "list"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /^palaver: cluster\.database postgres:\/\/palaver:\*\*\*\*@127\.0\.0\.1:1\/palaver: /,
    );
    expect(result.stderr).not.toContain("secret");
  });
});
