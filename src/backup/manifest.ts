/**
 * What a backup archive holds and the rules its paths follow. An archive is a
 * tar.gz of `manifest.json` plus three folders: `config/` (config.json and,
 * with --include-secrets, the .env beside it), `workspace/` and `state/`.
 * The manifest lists every other file with the SHA-256 of its bytes, so
 * `backup verify` can tell a changed, missing or extra file by name.
 */
import { createHash } from "node:crypto";

export const MANIFEST = "manifest.json";
export const MANIFEST_FORMAT = "palaver-backup";
export const MANIFEST_VERSION = 1;
export const CONFIG_ENTRY = "config/config.json";
export const ENV_ENTRY = "config/.env";
export const AREAS = ["config", "workspace", "state"] as const;

export interface ManifestFile {
  sha256: string;
  size: number;
}

export interface Manifest {
  format: typeof MANIFEST_FORMAT;
  version: number;
  createdAt: string;
  /** The workspace the archived config used (informational: restore sets its own). */
  workspace: string;
  secretsIncluded: boolean;
  /** Config paths (dotted) whose secret values were left out; fill them in after a restore. */
  secretsRemoved: string[];
  /** Archive path → checksum, for every file but the manifest itself. */
  files: Record<string, ManifestFile>;
}

export function sha256(data: Uint8Array): string {
  return createHash("sha256").update(data).digest("hex");
}

/**
 * Whether an archive entry's path may be restored: relative, no `..`, no
 * empty or `.` segments past a leading `./`, and inside one of the areas (or
 * the manifest). tar's own extraction also strips such paths; this is the
 * check that fails loudly instead.
 */
export function isSafeEntryPath(path: string): boolean {
  const clean = path.replace(/^\.\//, "").replace(/\/$/, "");
  if (clean === "" || clean === "." || clean.startsWith("/") || clean.includes("\\")) return false;
  if (/^[a-zA-Z]:/.test(clean)) return false;
  const parts = clean.split("/");
  if (parts.some((p) => p === ".." || p === "." || p === "")) return false;
  if (clean === MANIFEST) return true;
  return (AREAS as readonly string[]).includes(parts[0] ?? "");
}

/** The manifest parsed from its JSON text, or an error saying what is wrong with it. */
export function parseManifest(text: string): Manifest {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    throw new Error(`${MANIFEST} is not valid JSON`);
  }
  const m = data as Partial<Manifest> | null;
  if (!m || m.format !== MANIFEST_FORMAT || typeof m.files !== "object" || m.files === null) {
    throw new Error(`${MANIFEST} is not a palaver backup manifest`);
  }
  if (m.version !== MANIFEST_VERSION) {
    throw new Error(
      `${MANIFEST} has version ${String(m.version)}; this palaver reads version ${MANIFEST_VERSION}`,
    );
  }
  return m as Manifest;
}

/** Problems (one line each, naming the file) between the manifest and the files found with their checksums. */
export function compareFiles(manifest: Manifest, found: ReadonlyMap<string, string>): string[] {
  const problems: string[] = [];
  for (const [path, expected] of Object.entries(manifest.files)) {
    const actual = found.get(path);
    if (actual === undefined) problems.push(`${path}: missing from the archive`);
    else if (actual !== expected.sha256) problems.push(`${path}: checksum differs (the file was changed)`);
  }
  for (const path of found.keys()) {
    if (!Object.hasOwn(manifest.files, path))
      problems.push(`${path}: in the archive but not in the manifest`);
  }
  return problems;
}
