/**
 * `palaver backup create [--out file] [--include-secrets]`, `palaver backup verify <file>`,
 * `palaver backup restore <file> [--to folder] [--yes]`: one archive of the config, the
 * workspace and the state (src/backup/), taken safely while the gateway runs.
 */
import { existsSync, readdirSync, rmSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { createInterface } from "node:readline/promises";
import type { Command } from "commander";
import type { Manifest } from "../backup/manifest.js";
import { applyRestore, folderTarget, planRestore, type RestoreTarget } from "../backup/restore.js";
import { takeSnapshot } from "../backup/snapshot.js";
import { configPathFor } from "../config/load.js";
import { expandHome } from "../config/paths.js";
import { runningGatewayPid } from "../daemon/lock.js";
import { commonOptions, guarded, loadForCli } from "./common.js";

/** Replaced files listed by name before a restore over the current install; the rest are counted. */
const LISTED = 20;

/**
 * The archive code and its tar package, loaded by the backup commands only: every other command
 * (the gateway above all) would otherwise load and keep them for nothing.
 */
const archives = () => import("../backup/archive.js");

export function registerBackupCommand(program: Command): void {
  const backup = program
    .command("backup")
    .description("back up, verify and restore config, workspace and state");

  const create = backup
    .command("create")
    .description("write one archive of the config, the workspace and the state (safe while the gateway runs)")
    .option("--out <file>", "the archive to write (default: palaver-backup-<date>.tar.gz here)")
    .option("--include-secrets", "keep API keys, tokens and .env in the archive (else left out and listed)")
    .action((opts: { out?: string; includeSecrets?: boolean }) =>
      guarded(async () => {
        const loaded = loadForCli(create, { level: "warn" });
        const out = resolve(opts.out ?? defaultArchiveName(new Date()));
        if (existsSync(out)) throw new Error(`${out} exists; give another --out or remove it`);
        const { privateTempDir, writeArchive } = await archives();
        const staging = await privateTempDir("backup");
        try {
          const { manifest, skipped } = takeSnapshot(
            {
              configPath: loaded.path,
              workspace: loaded.workspace,
              includeSecrets: opts.includeSecrets === true,
              skip: [out],
            },
            staging,
          );
          await writeArchive(staging, out);
          process.stdout.write(`${describeCreated(out, manifest, skipped)}\n`);
        } finally {
          rmSync(staging, { recursive: true, force: true });
        }
      }),
    );

  backup
    .command("verify <file>")
    .description(
      "check every file of an archive against its manifest's checksums (exit 1 names what is wrong)",
    )
    .action((file: string) =>
      guarded(async () => {
        const { openArchive } = await archives();
        const opened = await openArchive(resolve(file));
        rmSync(opened.dir, { recursive: true, force: true });
        const count = Object.keys(opened.manifest.files).length;
        process.stdout.write(
          `${file}: OK, ${count} files match the manifest (made ${opened.manifest.createdAt})\n`,
        );
      }),
    );

  const restore = backup
    .command("restore <file>")
    .description(
      "restore an archive into an empty folder (--to), or over the current install when no gateway runs",
    )
    .option("--to <folder>", "an empty or new folder: config.json, the state and workspace/ go there")
    .option("--yes", "replace the current install's files without asking")
    .action((file: string, opts: { to?: string; yes?: boolean }) =>
      guarded(async () => {
        const archive = resolve(file);
        const { openArchive } = await archives();
        const opened = await openArchive(archive);
        try {
          const target =
            opts.to !== undefined ? freshFolderTarget(opts.to) : currentTarget(restore, opened.manifest);
          const plan = planRestore(opened.manifest, target);
          if (opts.to === undefined) {
            const pid = runningGatewayPid(dirname(target.configPath));
            if (pid !== null) {
              throw new Error(
                `a gateway (pid ${pid}) runs on ${dirname(target.configPath)}; stop it first ` +
                  "(systemctl stop palaver, or Ctrl-C), or restore into a new folder with --to",
              );
            }
            process.stdout.write(describeReplaced(plan.replaced));
            if (plan.replaced.length > 0 && opts.yes !== true && !(await confirm("Replace these files?"))) {
              throw new Error("nothing restored (not confirmed; add --yes when not at a terminal)");
            }
          }
          applyRestore(opened.dir, plan, target);
          process.stdout.write(`${describeRestored(plan.steps.length, target, opened.manifest)}\n`);
        } finally {
          rmSync(opened.dir, { recursive: true, force: true });
        }
      }),
    );
}

function defaultArchiveName(now: Date): string {
  const stamp = now
    .toISOString()
    .replace(/\.\d+Z$/, "")
    .replace(/[-:]/g, "")
    .replace("T", "-");
  return `palaver-backup-${stamp}.tar.gz`;
}

function freshFolderTarget(folder: string): RestoreTarget {
  const path = expandHome(folder);
  if (existsSync(path) && readdirSync(path).length > 0) {
    throw new Error(`--to ${path} is not empty; give a new or empty folder`);
  }
  return folderTarget(path);
}

/** The install the CLI's --config names; its workspace, else (no config yet) the archived one. */
function currentTarget(cmd: Command, manifest: Manifest): RestoreTarget {
  const configPath = configPathFor({ configPath: commonOptions(cmd).config });
  if (!existsSync(configPath)) return { configPath, workspace: manifest.workspace };
  const loaded = loadForCli(cmd, { level: "warn" });
  return { configPath: loaded.path, workspace: loaded.workspace };
}

async function confirm(question: string): Promise<boolean> {
  if (!process.stdin.isTTY) return false;
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  try {
    return /^y(es)?$/i.test((await rl.question(`${question} [y/N] `)).trim());
  } finally {
    rl.close();
  }
}

function describeCreated(out: string, manifest: Manifest, skipped: string[]): string {
  const paths = Object.keys(manifest.files);
  const count = (area: string) => paths.filter((p) => p.startsWith(`${area}/`)).length;
  const lines = [
    `wrote ${out}: ${paths.length} files (config ${count("config")}, workspace ${count("workspace")}, state ${count("state")})`,
  ];
  if (manifest.secretsRemoved.length > 0) {
    lines.push(
      `secrets left out (fill them in after a restore, or use --include-secrets): ${manifest.secretsRemoved.join(", ")}`,
    );
  }
  if (skipped.length > 0) lines.push(`not archived (not regular files): ${skipped.join(", ")}`);
  return lines.join("\n");
}

function describeReplaced(replaced: string[]): string {
  if (replaced.length === 0) return "no existing file will be replaced\n";
  const shown = replaced
    .slice(0, LISTED)
    .map((p) => `  ${p}\n`)
    .join("");
  const more = replaced.length > LISTED ? `  ... and ${replaced.length - LISTED} more\n` : "";
  return `the restore will replace ${replaced.length} existing files:\n${shown}${more}`;
}

function describeRestored(count: number, target: RestoreTarget, manifest: Manifest): string {
  const lines = [
    `restored ${count} files: config ${target.configPath}, workspace ${target.workspace}`,
    `start it with: palaver gateway --config ${target.configPath}`,
  ];
  if (manifest.secretsRemoved.length > 0) {
    lines.push(
      `the archive has no secrets; set these in the config or its .env: ${manifest.secretsRemoved.join(", ")}`,
    );
  }
  return lines.join("\n");
}
