/**
 * The files under a folder, for find_files and grep: walked without following symlinked folders
 * (no loops, no way out of the workspace), skipping `.git` and `node_modules`, and never entering
 * what the turn may not read (chat-privacy.ts: `sessions/`, other chats' media). A symlinked file
 * is followed only when its target is allowed too. Bounded by a count of entries.
 */
import { lstat, readdir, realpath, stat } from "node:fs/promises";
import { join, relative } from "node:path";
import { privateChatReason, type ChatFolders } from "./chat-privacy.js";
import { isInside } from "../../workspace/paths.js";

/** Folders nobody searches on purpose: version control internals and installed packages. */
const SKIPPED_FOLDERS = new Set([".git", "node_modules"]);

export interface WalkedFile {
  /** The real path. */
  abs: string;
  /** The path to show the model: relative to the workspace when inside it (read_file takes it as is). */
  shown: string;
  size: number;
  mtimeMs: number;
}

export interface WalkOptions {
  folders: ChatFolders;
  /** When set, symlinked files whose target is outside the workspace are left out. */
  restrict: boolean;
  /** Entries (files and folders) looked at before the walk stops. */
  maxEntries: number;
  signal: AbortSignal;
}

export interface Walk {
  files: WalkedFile[];
  /** True when maxEntries ended the walk early. */
  truncated: boolean;
}

/** The files at or under `root` (a real path already checked by the caller), breadth first. */
export async function walkFiles(root: string, opts: WalkOptions): Promise<Walk> {
  const files: WalkedFile[] = [];
  let seen = 0;
  const top = await stat(root);
  if (!top.isDirectory()) {
    return { files: [fileOf(root, top, opts.folders)], truncated: false };
  }
  const queue = [root];
  while (queue.length) {
    opts.signal.throwIfAborted();
    const dir = queue.shift()!;
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch {
      continue; // unreadable folder: nothing to report from it
    }
    entries.sort((a, b) => a.name.localeCompare(b.name));
    for (const entry of entries) {
      if (++seen > opts.maxEntries) return { files, truncated: true };
      const abs = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (!SKIPPED_FOLDERS.has(entry.name) && allowed(abs, opts)) queue.push(abs);
      } else if (entry.isFile()) {
        if (!allowed(abs, opts)) continue;
        const st = await lstat(abs).catch(() => null);
        if (st) files.push(fileOf(abs, st, opts.folders));
      } else if (entry.isSymbolicLink()) {
        const target = await realpath(abs).catch(() => null);
        if (!target || !allowed(target, opts)) continue;
        const st = await stat(target).catch(() => null);
        if (st?.isFile())
          files.push({ ...fileOf(target, st, opts.folders), shown: shownPath(abs, opts.folders) });
      }
    }
  }
  return { files, truncated: false };
}

function allowed(real: string, opts: WalkOptions): boolean {
  if (opts.restrict && !isInside(real, opts.folders.workspace)) return false;
  return privateChatReason(real, real, opts.folders) === null;
}

function fileOf(abs: string, st: { size: number; mtimeMs: number }, folders: ChatFolders): WalkedFile {
  return { abs, shown: shownPath(abs, folders), size: st.size, mtimeMs: st.mtimeMs };
}

function shownPath(abs: string, folders: ChatFolders): string {
  return isInside(abs, folders.workspace) ? relative(folders.workspace, abs) || "." : abs;
}
