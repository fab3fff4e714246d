/**
 * A consistent copy of an installation, staged in a private temp folder for
 * the archive, taken while the gateway may be running: each file is read
 * once and the checksum is of the bytes read. Append-only JSONL files
 * (sessions, journal, usage ledger) are cut to their last complete line, so a
 * line being appended is left for the next backup; every other state file is
 * replaced whole by the daemon (write to a temp file, rename), so one read
 * sees either the old or the new version.
 */
import { lstatSync, readdirSync, readFileSync, type Dirent } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { memoryIndexPath } from "../config/paths.js";
import { sessionsDirOf } from "../sessions/store.js";
import { tokenFileOf } from "../channels/web/auth.js";
import { mkdirPrivateSync, writeFilePrivateSync } from "../util/private-fs.js";
import {
  CONFIG_ENTRY,
  ENV_ENTRY,
  MANIFEST,
  MANIFEST_FORMAT,
  MANIFEST_VERSION,
  sha256,
  type Manifest,
} from "./manifest.js";
import { stripSecrets } from "./secrets.js";

export interface SnapshotSource {
  configPath: string;
  workspace: string;
  includeSecrets: boolean;
  /** Files never copied (the archive being written, when it lies inside a copied folder). */
  skip?: string[];
}

export interface Snapshot {
  manifest: Manifest;
  /** Files found but not copied (symlinks, sockets), for the CLI to mention. */
  skipped: string[];
}

/** Copies the installation into `staging` (an empty private folder) and writes its manifest there. */
export function takeSnapshot(source: SnapshotSource, staging: string): Snapshot {
  const state = dirname(source.configPath);
  const workspace = resolve(source.workspace);
  const files: Manifest["files"] = {};
  const skipped: string[] = [];
  const put = (entry: string, data: Uint8Array) => {
    const target = join(staging, entry);
    mkdirPrivateSync(dirname(target));
    writeFilePrivateSync(target, data);
    files[entry] = { sha256: sha256(data), size: data.byteLength };
  };

  const raw = readConfigJson(source.configPath);
  const stripped = source.includeSecrets ? { config: raw, removed: [] } : stripSecrets(raw);
  put(CONFIG_ENTRY, Buffer.from(`${JSON.stringify(stripped.config, null, 2)}\n`));
  const envFile = join(state, ".env");
  if (source.includeSecrets && isFile(envFile)) put(ENV_ENTRY, readFileSync(envFile));

  const left = new Set(
    [
      resolve(source.configPath),
      envFile,
      join(state, "gateway.lock"),
      join(sessionsDirOf(workspace), "gateway.lock"),
      join(state, "gateway.json"),
      ...["", "-wal", "-shm", "-journal"].map((s) => memoryIndexPath(state) + s),
      ...(source.includeSecrets ? [] : [tokenFileOf(state)]),
      ...(source.skip ?? []).map((p) => resolve(p)),
    ].map((p) => resolve(p)),
  );
  const copy = (area: string, root: string, skipDir?: string) =>
    walk(
      root,
      (path) => {
        if (left.has(path)) return;
        if (skipDir !== undefined && (path === skipDir || path.startsWith(skipDir + sep))) return;
        put(`${area}/${relative(root, path).split(sep).join("/")}`, readConsistent(path));
      },
      skipped,
    );

  copy("workspace", workspace);
  // The default workspace (~/.palaver/workspace) lies inside the state folder: archived once, as workspace/.
  copy("state", state, workspace);

  const manifest: Manifest = {
    format: MANIFEST_FORMAT,
    version: MANIFEST_VERSION,
    createdAt: new Date().toISOString(),
    workspace,
    secretsIncluded: source.includeSecrets,
    secretsRemoved: stripped.removed,
    files,
  };
  writeFilePrivateSync(join(staging, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`);
  return { manifest, skipped };
}

function readConfigJson(path: string): unknown {
  if (!isFile(path)) return {};
  const text = readFileSync(path, "utf8").replace(/^\uFEFF/, "");
  if (text.trim() === "") return {};
  return JSON.parse(text) as unknown;
}

/** The file's bytes; a JSONL file only up to its last complete line (a line mid-append is not a line yet). */
export function readConsistent(path: string): Buffer {
  const data = readFileSync(path);
  if (!path.endsWith(".jsonl")) return data;
  return data.subarray(0, data.lastIndexOf(0x0a) + 1);
}

function isFile(path: string): boolean {
  try {
    return lstatSync(path).isFile();
  } catch {
    return false;
  }
}

/** Calls `onFile` for every regular file under `root`; symlinks and special files are listed in `skipped`. */
function walk(root: string, onFile: (path: string) => void, skipped: string[]): void {
  let entries: Dirent[];
  try {
    entries = readdirSync(root, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
    throw err;
  }
  for (const entry of entries) {
    const path = join(root, entry.name);
    if (entry.isDirectory()) walk(path, onFile, skipped);
    else if (entry.isFile()) onFile(path);
    else skipped.push(path);
  }
}
