import { chmodSync, constants, copyFileSync, existsSync, readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { PRIVATE_FILE_MODE, mkdirPrivateSync } from "../util/private-fs.js";
import { templatesDir } from "./paths.js";

/** Folders every workspace has, even when the templates hold nothing for them. */
const WORKSPACE_DIRS = ["skills", "sessions", "memory", "media"];
/** Built-in skills are read from the package, so they are not copied (a copy would shadow updates). */
const NOT_COPIED = new Set(["skills"]);
const MAX_DEPTH = 16;

export interface WorkspaceSetup {
  /** Paths relative to the workspace of the files copied from the templates. */
  created: string[];
  /** Template files skipped because the workspace already has them. */
  kept: string[];
}

/**
 * Copies every template file the workspace lacks; never overwrites a file.
 * What it creates is owner-only (files 0600, folders 0700): the workspace will
 * hold conversations and memory. Existing files and folders keep their modes.
 */
export function createWorkspace(workspace: string, templates = templatesDir()): WorkspaceSetup {
  const setup: WorkspaceSetup = { created: [], kept: [] };
  mkdirPrivateSync(workspace);
  for (const dir of WORKSPACE_DIRS) mkdirPrivateSync(join(workspace, dir));
  if (existsSync(templates)) copyTree(templates, templates, workspace, setup, 0);
  return setup;
}

function copyTree(root: string, from: string, workspace: string, setup: WorkspaceSetup, depth: number): void {
  if (depth > MAX_DEPTH) return;
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    const source = join(from, entry.name);
    const rel = relative(root, source);
    if (depth === 0 && NOT_COPIED.has(entry.name)) continue;
    const target = join(workspace, rel);
    if (entry.isDirectory()) {
      mkdirPrivateSync(target);
      copyTree(root, source, workspace, setup, depth + 1);
    } else if (entry.isFile()) {
      try {
        // COPYFILE_EXCL: the check and the copy are one step, so a user file is never replaced.
        copyFileSync(source, target, constants.COPYFILE_EXCL);
        // copyFile keeps the template's mode (0644 in the package).
        chmodSync(target, PRIVATE_FILE_MODE);
        setup.created.push(rel);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
        setup.kept.push(rel);
      }
    }
  }
}
