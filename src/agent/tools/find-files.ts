/**
 * find_files: files whose name (or, for a glob with folders, whose path) matches a glob, newest
 * first, at most FIND_FILES_MAX_RESULTS of them. Read-only, under read_file's workspace policy.
 */
import { basename, relative } from "node:path";
import * as z from "zod";
import { globHasFolders, pathGlobToRegExp } from "./path-glob.js";
import { searchRoot } from "./search-root.js";
import { defineTool } from "./types.js";
import { walkFiles } from "./workspace-walk.js";
import type { PathPolicy } from "../../workspace/paths.js";

const FIND_FILES_MAX_RESULTS = 100;
/** Files and folders looked at before the search stops (a huge tree must not stall the turn). */
export const SEARCH_MAX_ENTRIES = 50_000;

export function createFindFilesTool(policy: PathPolicy) {
  return defineTool({
    name: "find_files",
    readOnly: true,
    description:
      "Find files by glob, newest first (at most 100). `*.md` matches file names anywhere below path; " +
      "a glob with a folder (`notes/**/*.txt`) matches paths relative to path. `**` spans folders, " +
      "`{a,b}` either. .git and node_modules are skipped.",
    parameters: z.object({
      pattern: z.string().min(1).describe("The glob, e.g. *.md, **/report*.{csv,xlsx}, notes/*.txt"),
      path: z.string().optional().describe("The folder to search (default: the workspace)"),
    }),
    async execute({ pattern, path }, ctx) {
      const { root, folders } = await searchRoot(path, policy, ctx);
      const glob = pathGlobToRegExp(pattern);
      const byPath = globHasFolders(pattern);
      const walk = await walkFiles(root, {
        folders,
        restrict: policy.restrict,
        maxEntries: SEARCH_MAX_ENTRIES,
        signal: ctx.signal,
      });
      const matches = walk.files
        .filter((f) => glob.test(byPath ? relative(root, f.abs) : basename(f.shown)))
        .sort((a, b) => b.mtimeMs - a.mtimeMs || a.shown.localeCompare(b.shown));
      const notes: string[] = [];
      if (walk.truncated)
        notes.push(`(stopped after ${SEARCH_MAX_ENTRIES} entries: search a smaller folder)`);
      if (matches.length === 0) return [`No files match ${pattern}.`, ...notes].join("\n");
      const shown = matches.slice(0, FIND_FILES_MAX_RESULTS);
      if (matches.length > shown.length) {
        notes.push(`(${matches.length - shown.length} more not shown: narrow the pattern or the path)`);
      }
      const lines = shown.map(
        (f) => `${f.shown}  (${f.size} bytes, ${new Date(f.mtimeMs).toISOString().slice(0, 16)}Z)`,
      );
      return [`${matches.length} file(s) match ${pattern}, newest first:`, ...lines, ...notes].join("\n");
    },
  });
}
