/**
 * grep: a regular expression over the text files below a path, with ±context lines, in grep's
 * output shape. Bounded: GREP_MAX_MATCHES matches, files up to GREP_MAX_FILE_BYTES, binary files
 * skipped, lines cut (grep-scan.ts), and GREP_TIMEOUT_MS for the whole scan, so a pattern that
 * backtracks without end costs seconds, not the turn. Read-only, under read_file's workspace policy.
 */
import * as z from "zod";
import { ToolError } from "../../util/errors.js";
import { SEARCH_MAX_ENTRIES } from "./find-files.js";
import { scanFiles } from "./grep-scan.js";
import { searchRoot } from "./search-root.js";
import { defineTool } from "./types.js";
import { othersAttachment } from "./untrusted-files.js";
import { walkFiles } from "./workspace-walk.js";
import { isInside, type PathPolicy } from "../../workspace/paths.js";

const GREP_MAX_MATCHES = 100;
const GREP_MAX_FILE_BYTES = 2 * 1024 * 1024;
const GREP_TIMEOUT_MS = 10_000;
const GREP_MAX_CONTEXT = 5;

export interface GrepOptions extends PathPolicy {
  /** The scan's time bound (tests shorten it). */
  timeoutMs?: number;
}

export function createGrepTool(opts: GrepOptions) {
  return defineTool({
    name: "grep",
    readOnly: true,
    description:
      "Search text files for a regular expression (JavaScript syntax; add (?i) at the start to ignore case). " +
      "Shows `path:line: text` for each match (at most 100), with `context` lines around it. " +
      "Binary files, files over 2 MB, .git and node_modules are skipped; media/ (attachments) only when path is in it.",
    parameters: z.object({
      pattern: z.string().min(1).describe("The regular expression, e.g. TODO|FIXME or ^## "),
      path: z.string().optional().describe("A file or folder to search (default: the workspace)"),
      context: z
        .number()
        .int()
        .min(0)
        .max(GREP_MAX_CONTEXT)
        .optional()
        .describe(`Lines shown before and after each match (0-${GREP_MAX_CONTEXT}, default 0)`),
    }),
    // Attachments are text strangers may have written: searching them marks the turn, as read_file does.
    untrustedSource: ({ path }, ctx) => (path === undefined ? null : othersAttachment(path, ctx)),
    async execute({ pattern, path, context }, ctx) {
      const { source, flags } = compile(pattern);
      const { root, folders } = await searchRoot(path, opts, ctx);
      const walk = await walkFiles(root, {
        folders,
        restrict: opts.restrict,
        maxEntries: SEARCH_MAX_ENTRIES,
        signal: ctx.signal,
      });
      const scan = await scanFiles(
        {
          pattern: source,
          flags,
          // A search of the workspace leaves attachments out (untrusted content); a search in media/ reads them.
          files: walk.files
            .filter((f) => isInside(root, folders.media) || !isInside(f.abs, folders.media))
            .map(({ abs, shown }) => ({ abs, shown })),
          context: context ?? 0,
          maxMatches: GREP_MAX_MATCHES,
          maxFileBytes: GREP_MAX_FILE_BYTES,
        },
        opts.timeoutMs ?? GREP_TIMEOUT_MS,
        ctx.signal,
      );
      const notes: string[] = [];
      if (scan.stopped === "matches")
        notes.push(`(stopped at ${GREP_MAX_MATCHES} matches: narrow the pattern or the path)`);
      if (scan.stopped === "time") {
        notes.push(
          `(stopped after ${(opts.timeoutMs ?? GREP_TIMEOUT_MS) / 1000} s: the pattern is too slow or the folder too big; ` +
            "use a simpler pattern or a smaller path)",
        );
      }
      if (walk.truncated) notes.push(`(only the first ${SEARCH_MAX_ENTRIES} entries were searched)`);
      const skipped = [
        scan.skipped.binary ? `${scan.skipped.binary} binary` : "",
        scan.skipped.large ? `${scan.skipped.large} over 2 MB` : "",
      ].filter(Boolean);
      if (skipped.length) notes.push(`(skipped: ${skipped.join(", ")})`);
      if (scan.matches === 0) return [`No matches for ${pattern}.`, ...notes].join("\n");
      return [`${scan.matches} match(es) for ${pattern}:`, ...scan.lines, ...notes].join("\n");
    },
  });
}

/** The pattern as a RegExp source and flags; a leading (?i) means ignore case. Invalid: a clear error. */
function compile(pattern: string): { source: string; flags: string } {
  const ignoreCase = pattern.startsWith("(?i)");
  const source = ignoreCase ? pattern.slice(4) : pattern;
  const flags = ignoreCase ? "iu" : "u";
  try {
    new RegExp(source, flags);
  } catch (err) {
    throw new ToolError(`invalid regular expression ${pattern}: ${(err as Error).message}`);
  }
  return { source, flags };
}
