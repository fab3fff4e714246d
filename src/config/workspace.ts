import { constants, copyFileSync, existsSync, mkdirSync, readdirSync } from "node:fs";
import { join, relative } from "node:path";
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

/** Copies every template file the workspace lacks; never overwrites a file. */
export function createWorkspace(workspace: string, templates = templatesDir()): WorkspaceSetup {
  const setup: WorkspaceSetup = { created: [], kept: [] };
  mkdirSync(workspace, { recursive: true });
  for (const dir of WORKSPACE_DIRS) mkdirSync(join(workspace, dir), { recursive: true });
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
      mkdirSync(target, { recursive: true });
      copyTree(root, source, workspace, setup, depth + 1);
    } else if (entry.isFile()) {
      try {
        // COPYFILE_EXCL: the check and the copy are one step, so a user file is never replaced.
        copyFileSync(source, target, constants.COPYFILE_EXCL);
        setup.created.push(rel);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
        setup.kept.push(rel);
      }
    }
  }
}
