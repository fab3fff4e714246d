/**
 * Files and folders only the owner can read: the workspace holds conversations
 * and long-term memory, the state folder tokens and queued messages, and the
 * server may have other users. Every file palaver creates goes through here
 * (0600, folders 0700) instead of taking the umask's usual 0644/0755.
 *
 * The mode is applied when a file is created (and kept by atomic replacement,
 * whose temp file is created here); tightenMode() fixes a file created by an
 * older version.
 */
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { appendFile, chmod, mkdir, open, rename, stat, unlink, writeFile } from "node:fs/promises";

export const PRIVATE_FILE_MODE = 0o600;
export const PRIVATE_DIR_MODE = 0o700;

/** mkdir -p whose created folders are 0700 (existing ones are left as they are). */
export async function mkdirPrivate(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
}

export function mkdirPrivateSync(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
}

/** writeFile creating the file 0600; an existing file is tightened to 0600 too. */
export async function writeFilePrivate(path: string, data: string | Uint8Array): Promise<void> {
  await writeFile(path, data, { mode: PRIVATE_FILE_MODE });
  await chmod(path, PRIVATE_FILE_MODE);
}

export function writeFilePrivateSync(path: string, data: string | Uint8Array, flag = "w"): void {
  writeFileSync(path, data, { mode: PRIVATE_FILE_MODE, flag });
  chmodSync(path, PRIVATE_FILE_MODE);
}

/** One O_APPEND write (concurrent appends never interleave); a new file is created 0600. */
export async function appendFilePrivate(path: string, data: string): Promise<void> {
  await appendFile(path, data, { encoding: "utf8", mode: PRIVATE_FILE_MODE });
}

/**
 * Replaces `path` atomically (a reader sees the old file or the new one, never
 * half) with a file that is 0600 whatever the old one was. `data` may come in
 * chunks, so a long file is never one giant string.
 */
export async function replaceFilePrivate(
  path: string,
  data: string | Uint8Array | Iterable<string>,
): Promise<void> {
  const tmp = `${path}.${process.pid}.${Date.now()}.${Math.random().toString(36).slice(2)}.tmp`;
  try {
    const fh = await open(tmp, "w", PRIVATE_FILE_MODE);
    try {
      if (typeof data === "string" || data instanceof Uint8Array) await fh.writeFile(data);
      else for (const chunk of data) await fh.write(chunk);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
}

/** Removes group and other permissions from an existing file or folder; a missing one is fine. */
export async function tightenMode(path: string): Promise<void> {
  try {
    const { mode } = await stat(path);
    if ((mode & 0o077) !== 0) await chmod(path, mode & 0o700);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
}
