/**
 * Where each file of a backup goes on restore, and the copying. The archive's
 * config lands at the target config path with agents.defaults.workspace set
 * to the target workspace, so `palaver gateway --config <that path>` runs on
 * the restored files; the state files land in the folder beside the config.
 */
import { existsSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { memoryIndexPath } from "../config/paths.js";
import { mkdirPrivateSync, writeFilePrivateSync } from "../util/private-fs.js";
import { CONFIG_ENTRY, ENV_ENTRY, type Manifest } from "./manifest.js";

export interface RestoreTarget {
  configPath: string;
  workspace: string;
}

export interface RestoreStep {
  /** Path inside the archive. */
  entry: string;
  /** Where it is written. */
  path: string;
}

export interface RestorePlan {
  steps: RestoreStep[];
  /** Target files that exist and will be overwritten. */
  replaced: string[];
}

/** The target `{config, workspace}` of a restore into a fresh folder. */
export function folderTarget(folder: string): RestoreTarget {
  return { configPath: join(folder, "config.json"), workspace: join(folder, "workspace") };
}

/** Where the archive entry goes (pure). */
export function targetOf(entry: string, target: RestoreTarget): string {
  if (entry === CONFIG_ENTRY) return target.configPath;
  if (entry === ENV_ENTRY) return join(dirname(target.configPath), ".env");
  const slash = entry.indexOf("/");
  const area = entry.slice(0, slash);
  const rest = entry.slice(slash + 1);
  if (area === "workspace") return join(target.workspace, rest);
  if (area === "state") return join(dirname(target.configPath), rest);
  throw new Error(`${entry}: not a file a backup restores`);
}

export function planRestore(manifest: Manifest, target: RestoreTarget): RestorePlan {
  const steps = Object.keys(manifest.files)
    .sort()
    .map((entry) => ({ entry, path: targetOf(entry, target) }));
  return { steps, replaced: steps.map((s) => s.path).filter((p) => existsSync(p)) };
}

/** The archived config text with agents.defaults.workspace pointing at `workspace` (pure). */
export function withWorkspace(configText: string, workspace: string): string {
  const config = JSON.parse(configText) as Record<string, unknown>;
  const agents = objectAt(config, "agents");
  const defaults = objectAt(agents, "defaults");
  defaults.workspace = workspace;
  return `${JSON.stringify(config, null, 2)}\n`;
}

function objectAt(parent: Record<string, unknown>, key: string): Record<string, unknown> {
  const value = parent[key];
  if (typeof value === "object" && value !== null && !Array.isArray(value))
    return value as Record<string, unknown>;
  const fresh: Record<string, unknown> = {};
  parent[key] = fresh;
  return fresh;
}

/** Copies the opened archive (`dir`) to the plan's paths, owner-only. */
export function applyRestore(dir: string, plan: RestorePlan, target: RestoreTarget): void {
  for (const step of plan.steps) {
    const data = readFileSync(join(dir, step.entry));
    mkdirPrivateSync(dirname(step.path));
    writeFilePrivateSync(
      step.path,
      step.entry === CONFIG_ENTRY ? withWorkspace(data.toString("utf8"), target.workspace) : data,
    );
  }
  // The memory search index is not archived; an old one would describe other files. It is rebuilt.
  const index = memoryIndexPath(dirname(target.configPath));
  for (const suffix of ["", "-wal", "-shm", "-journal"]) rmSync(index + suffix, { force: true });
}
