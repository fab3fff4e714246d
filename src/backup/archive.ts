/**
 * Writing and reading backup archives with the `tar` package: create from a
 * staged snapshot, and open (check every entry's path and kind, extract into
 * a private temp folder, compare every file with the manifest). verify and
 * restore both open; restore then copies from the opened folder.
 */
import { createWriteStream, readFileSync, readdirSync, renameSync, rmSync, existsSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative, sep } from "node:path";
import { pipeline } from "node:stream/promises";
import * as tar from "tar";
import { PRIVATE_FILE_MODE } from "../util/private-fs.js";
import {
  AREAS,
  compareFiles,
  isSafeEntryPath,
  MANIFEST,
  parseManifest,
  sha256,
  type Manifest,
} from "./manifest.js";

/** A backup that failed verification: each problem names the file. */
export class BackupDamagedError extends Error {
  constructor(
    readonly file: string,
    readonly problems: string[],
  ) {
    super(`${file} failed verification:\n${problems.map((p) => `  ${p}`).join("\n")}`);
  }
}

/** A private temp folder, removed by the caller (`rmSync(dir, { recursive: true, force: true })`). */
export function privateTempDir(prefix: string): Promise<string> {
  // mkdtemp creates the folder 0700.
  return mkdtemp(join(tmpdir(), `palaver-${prefix}-`));
}

/** Writes `staging` (a snapshot with its manifest) to `out` as tar.gz, owner-only; `out` appears whole or not at all. */
export async function writeArchive(staging: string, out: string): Promise<void> {
  const entries = [MANIFEST, ...AREAS.filter((a) => existsSync(join(staging, a)))];
  const partial = `${out}.partial`;
  try {
    await pipeline(
      tar.create({ gzip: true, cwd: staging, portable: true }, entries),
      createWriteStream(partial, { mode: PRIVATE_FILE_MODE, flags: "wx" }),
    );
    renameSync(partial, out);
  } catch (err) {
    rmSync(partial, { force: true });
    throw err;
  }
}

export interface OpenedArchive {
  manifest: Manifest;
  /** The extracted files (manifest.json, config/, workspace/, state/); the caller removes it. */
  dir: string;
}

/**
 * Checks and extracts `file`: refuses entries with an absolute or `..` path,
 * outside the archive's areas, or of another kind than file and folder (links
 * could point anywhere), then compares the extracted files with the manifest.
 * Throws BackupDamagedError naming each bad file.
 */
export async function openArchive(file: string): Promise<OpenedArchive> {
  const unsafe: string[] = [];
  await readTar(
    () =>
      tar.list({
        file,
        strict: true,
        onReadEntry: (entry) => {
          if (!isSafeEntryPath(entry.path))
            unsafe.push(`${entry.path}: unsafe path (absolute, "..", or outside the backup's folders)`);
          else if (entry.type !== "File" && entry.type !== "Directory")
            unsafe.push(`${entry.path}: a ${entry.type}, not a file`);
          entry.resume();
        },
      }),
    file,
  );
  if (unsafe.length > 0) throw new BackupDamagedError(file, unsafe);

  const dir = await privateTempDir("restore");
  try {
    await readTar(
      () =>
        tar.extract({
          file,
          cwd: dir,
          strict: true,
          // tar already strips absolute paths and refuses ".."; this also keeps out anything listed above.
          filter: (path, entry) =>
            isSafeEntryPath(path) && "type" in entry && (entry.type === "File" || entry.type === "Directory"),
        }),
      file,
    );
    if (!existsSync(join(dir, MANIFEST))) throw new BackupDamagedError(file, [`${MANIFEST}: missing`]);
    let manifest: Manifest;
    try {
      manifest = parseManifest(readFileSync(join(dir, MANIFEST), "utf8"));
    } catch (err) {
      throw new BackupDamagedError(file, [(err as Error).message]);
    }
    const found = new Map<string, string>();
    for (const path of filesUnder(dir)) {
      if (path !== MANIFEST) found.set(path, sha256(readFileSync(join(dir, path))));
    }
    const problems = compareFiles(manifest, found);
    if (problems.length > 0) throw new BackupDamagedError(file, problems);
    return { manifest, dir };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/** Runs a tar read; a damaged gzip or tar stream becomes a BackupDamagedError. */
async function readTar(run: () => Promise<void>, file: string): Promise<void> {
  try {
    await run();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") throw err;
    throw new BackupDamagedError(file, [`not a readable tar.gz: ${(err as Error).message}`]);
  }
}

/** Relative paths (with "/") of every file under `root`. */
export function filesUnder(root: string, dir = root): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...filesUnder(root, path));
    else out.push(relative(root, path).split(sep).join("/"));
  }
  return out;
}
