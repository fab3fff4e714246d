/**
 * `palaver cluster import|export` (docs/cluster.md): moves one process's sessions, cron jobs and
 * state files into the cluster database (`cluster.database`), and back out as files, so a bot can
 * go from one process to a cluster and back. Both run with the gateways stopped: an import is the
 * state as it is on disk now, an export the database as it is now.
 */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Command } from "commander";
import type { LoadedConfig } from "../config/load.js";
import { approvalRulesPath, cronStorePath, openQuestionsPath, stateDir } from "../config/paths.js";
import { DOCUMENT_NAMES } from "../db/names.js";
import type { Database } from "../db/pool.js";
import { logger } from "../log.js";
import { pairingPath } from "../pairing/store.js";
import { sessionsDirOf } from "../sessions/store.js";
import { errorMessage, PalaverError } from "../util/errors.js";
import type { ImportItem, StateFiles } from "./cluster-transfer.js";
import { addCommonOptions, guarded, loadForCli } from "./common.js";

/**
 * The state files kept in palaver.documents, by name (CLUSTER.md), with where one process keeps
 * each, relative to the state folder.
 */
const DOCUMENTS: { name: string; path: (configPath: string) => string }[] = [
  { name: DOCUMENT_NAMES.pairing, path: (configPath) => pairingPath(stateDir(configPath)) },
  { name: DOCUMENT_NAMES.approvalRules, path: approvalRulesPath },
  { name: DOCUMENT_NAMES.openQuestions, path: openQuestionsPath },
];

export function registerClusterCommand(program: Command): void {
  const cluster = program
    .command("cluster")
    .description(
      "cluster mode: move sessions and state between this machine's files and the cluster database; unblock a conversation",
    );

  const imp = cluster
    .command("import")
    .description(
      "copy the workspace's sessions, the cron jobs, pairing and approval state into the cluster database",
    )
    .option("--force", "replace what the database already holds under the same name when it differs")
    .action((opts: { force?: boolean }) =>
      guarded(async () => {
        const loaded = loadForCli(imp, { level: "warn" });
        await withDatabase(loaded, "import", async (db) => {
          const { importState } = await import("./cluster-transfer.js");
          const result = await importState(db, stateFilesOf(loaded), { force: opts.force === true, log });
          process.stdout.write(importReport(result.items, result.applied));
          if (!result.applied) process.exitCode = 1;
        });
      }),
    );

  const exp = cluster
    .command("export")
    .description("write the cluster database's sessions, cron jobs and state as one process's files")
    .option("--to <dir>", "the folder to write into (default: a new folder palaver-export-<time> here)")
    .option("--force", "overwrite files that are already there")
    .action((opts: { to?: string; force?: boolean }) =>
      guarded(async () => {
        const loaded = loadForCli(exp, { level: "warn" });
        const to = resolve(opts.to ?? defaultExportDir(new Date()));
        if (opts.to === undefined && existsSync(to))
          throw new PalaverError(`${to} already exists; say where with --to`);
        await withDatabase(loaded, "export", async (db) => {
          const { exportState } = await import("./cluster-transfer.js");
          const written = await exportState(db, exportTargetOf(to), { force: opts.force === true, log });
          process.stdout.write(exportReport(to, written));
        });
      }),
    );

  const unblock = cluster
    .command("unblock <session>")
    .description(
      "let a blocked conversation (palaver status lists them) go on: its failed turn runs again, or with --drop is given up",
    )
    .option("--drop", "give the failed turn up (its message stays unanswered) instead of running it again")
    .action((session: string, opts: { drop?: boolean }) =>
      guarded(async () => {
        const loaded = loadForCli(unblock, { level: "warn" });
        await withDatabase(loaded, "unblock", async (db) => {
          const { unblockConversation } = await import("../cluster/turns.js");
          const found = await unblockConversation(db, session, opts.drop === true);
          if (found === 0) {
            process.stdout.write(`${session} is not blocked: no failed turn of it in the queue.\n`);
            process.exitCode = 1;
          } else {
            process.stdout.write(
              `${session}: ${found} failed turn${found === 1 ? "" : "s"} ${opts.drop ? "given up" : "queued to run again"}.\n`,
            );
          }
        });
      }),
    );

  for (const cmd of [imp, exp, unblock]) addCommonOptions(cmd);
}

const log = logger("cluster");

/** Where one process keeps what import reads. */
function stateFilesOf(loaded: LoadedConfig): StateFiles {
  return {
    sessionsDir: sessionsDirOf(loaded.workspace),
    cronPath: cronStorePath(loaded.path),
    documents: DOCUMENTS.map((d) => ({ name: d.name, path: d.path(loaded.path) })),
  };
}

/**
 * The export folder mirrors one process's layout: `workspace/sessions/` (copy into the workspace)
 * and `state/` (copy into the state folder, beside the config), named by the same paths.ts helpers.
 */
function exportTargetOf(to: string): StateFiles {
  const configInState = join(to, "state", "config.json");
  return {
    sessionsDir: sessionsDirOf(join(to, "workspace")),
    cronPath: cronStorePath(configInState),
    documents: DOCUMENTS.map((d) => ({ name: d.name, path: d.path(configInState) })),
  };
}

async function withDatabase(
  loaded: LoadedConfig,
  verb: string,
  work: (db: Database) => Promise<void>,
): Promise<void> {
  const url = loaded.config.cluster.database;
  if (url === undefined)
    throw new PalaverError(
      `cluster.database is not set in ${loaded.path}: set it (or the environment variable ` +
        `PALAVER_CLUSTER__DATABASE) to the cluster's PostgreSQL URL, e.g. postgres://palaver:secret@db:5432/palaver`,
    );
  // The database code loads when one of these commands runs (each action imports what it does):
  // every other command, and a one-process gateway, starts without the PostgreSQL client.
  const [{ openDatabase, shownUrl }, { migrate }] = await Promise.all([
    import("../db/pool.js"),
    import("../db/schema.js"),
  ]);
  const db = openDatabase({ url, applicationName: `palaver cluster ${verb}`, log });
  try {
    try {
      await migrate(db, log);
    } catch (err) {
      if (err instanceof PalaverError) throw err;
      throw new PalaverError(
        `cannot use the cluster database at ${shownUrl(url)}: ${errorMessage(err)} ` +
          `(check cluster.database in ${loaded.path} and that PostgreSQL is running)`,
        { cause: err },
      );
    }
    await work(db);
  } finally {
    await db.end();
  }
}

/** Pure: what `palaver cluster import` prints. */
function importReport(items: readonly ImportItem[], applied: boolean): string {
  const lines = items.map((i) => `  ${i.outcome.padEnd(9)} ${i.what}${i.detail ? `: ${i.detail}` : ""}`);
  const count = (o: ImportItem["outcome"]) => items.filter((i) => i.outcome === o).length;
  if (!applied)
    return (
      `${lines.join("\n")}\nNothing imported: ${count("conflict")} item(s) differ from what the cluster ` +
      "database already holds. Export the database first (palaver cluster export) if you need it, " +
      "then import again with --force to replace them.\n"
    );
  const changed = count("imported") + count("replaced");
  if (items.length === 0) return "Nothing to import: no sessions, cron jobs or state files found.\n";
  const summary =
    changed === 0
      ? "Nothing changed: the cluster database already holds all of this."
      : `Imported ${count("imported")}, replaced ${count("replaced")}, unchanged ${count("unchanged")}, skipped ${count("skipped")}.`;
  return `${lines.join("\n")}\n${summary}\n`;
}

/** Pure: what `palaver cluster export` prints, with where each part goes to run as one process again. */
function exportReport(to: string, written: readonly string[]): string {
  if (written.length === 0)
    return `The cluster database holds nothing to export; nothing written to ${to}.\n`;
  const sessions = join(to, "workspace", "sessions");
  const state = join(to, "state");
  const copies = [
    written.some((p) => p.startsWith(sessions))
      ? `${sessions} into the workspace's sessions folder`
      : undefined,
    written.some((p) => p.startsWith(state))
      ? `what is in ${state} into the state folder (beside config.json)`
      : undefined,
  ].filter((c) => c !== undefined);
  return (
    `${written.map((p) => `  ${p}`).join("\n")}\nWrote ${written.length} file(s) into ${to}.\n` +
    `To go back to one process: copy ${copies.join(", and ")}, then remove cluster.database from the config.\n`
  );
}

/** A new folder in the current one, named by the time: palaver-export-20260127-180102. */
function defaultExportDir(now: Date): string {
  const pad = (n: number) => String(n).padStart(2, "0");
  const stamp =
    `${now.getFullYear()}${pad(now.getMonth() + 1)}${pad(now.getDate())}-` +
    `${pad(now.getHours())}${pad(now.getMinutes())}${pad(now.getSeconds())}`;
  return `palaver-export-${stamp}`;
}
