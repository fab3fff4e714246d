/**
 * The file tools the model sees: read_file, write_file, edit_file, list_dir
 * (names and parameters as in nanobot). Paths are relative to the workspace
 * and, when restricted, must stay inside it (see workspace/paths.ts); other
 * chats' data is never reachable (chat-privacy.ts).
 */
import { open, readdir, stat, writeFile } from "node:fs/promises";
import { mkdirPrivate, PRIVATE_FILE_MODE } from "../../util/private-fs.js";
import { dirname, join } from "node:path";
import * as z from "zod";
import { ToolError, errorMessage } from "../../util/errors.js";
import { refuseOtherChats } from "./chat-privacy.js";
import { defineTool, type Tool, type ToolContext } from "./types.js";
import { resolveToolPath, type PathPolicy } from "../../workspace/paths.js";

export interface FilesystemToolOptions {
  workspace: string;
  restrictToWorkspace: boolean;
  readFileMaxChars: number;
}

/** Files up to this size are read whole (so the notice can say how long they are). */
const READ_WHOLE_MAX_BYTES = 32 * 1024 * 1024;
/** Bytes looked at to decide whether a file is binary (as git does). */
const BINARY_SNIFF_BYTES = 8000;
/** Entries list_dir shows before it stops. */
export const LIST_DIR_MAX_ENTRIES = 500;
/** Above this many windows × lines, edit_file skips the closest-match search. */
const CLOSEST_MATCH_BUDGET = 4_000_000;
/** Lines of the closest match shown back to the model. */
const CLOSEST_MATCH_MAX_LINES = 40;

export function createFilesystemTools(opts: FilesystemToolOptions): Tool[] {
  const policy: PathPolicy = { workspace: opts.workspace, restrict: opts.restrictToWorkspace };
  return [
    readFileTool(policy, opts.readFileMaxChars),
    writeFileTool(policy),
    editFileTool(policy),
    listDirTool(policy),
  ];
}

function readFileTool(policy: PathPolicy, maxChars: number) {
  return defineTool({
    name: "read_file",
    readOnly: true,
    description: "Read the contents of a file at the given path.",
    parameters: z.object({
      path: z.string().describe("The file path to read (relative to the workspace, or absolute)"),
    }),
    async execute({ path }, ctx) {
      const abs = await resolveFilePath(path, policy, ctx);
      const { text, totalChars, totalBytes } = await readTextFile(abs, path, maxChars);
      if (totalBytes === 0) return `(${path} is empty)`;
      const total = totalChars === null ? `a file of ${totalBytes} bytes` : `${totalChars} characters`;
      return truncateWithNotice(text, maxChars, total);
    },
  });
}

function writeFileTool(policy: PathPolicy) {
  return defineTool({
    name: "write_file",
    description: "Write content to a file at the given path. Creates parent directories if needed.",
    parameters: z.object({
      path: z.string().describe("The file path to write to (relative to the workspace, or absolute)"),
      content: z.string().describe("The content to write"),
    }),
    async execute({ path, content }, ctx) {
      const abs = await resolveFilePath(path, policy, ctx);
      const existing = await statOrNull(abs);
      if (existing?.isDirectory())
        throw new ToolError(`${path} is a directory; give a file path to write to`);
      try {
        // A new file is private to the daemon's user (an existing one keeps its mode).
        await mkdirPrivate(dirname(abs));
        await writeFile(abs, content, { encoding: "utf8", mode: PRIVATE_FILE_MODE });
      } catch (err) {
        throw new ToolError(`could not write ${path}: ${errorMessage(err)}`, { cause: err });
      }
      const bytes = Buffer.byteLength(content, "utf8");
      return `Wrote ${bytes} bytes to ${path}`;
    },
  });
}

function editFileTool(policy: PathPolicy) {
  return defineTool({
    name: "edit_file",
    description:
      "Edit a file by replacing old_text with new_text. The old_text must exist exactly once in the file " +
      "(copy it exactly, including whitespace and indentation).",
    parameters: z.object({
      path: z.string().describe("The file path to edit (relative to the workspace, or absolute)"),
      old_text: z.string().describe("The exact text to find and replace"),
      new_text: z.string().describe("The text to replace with"),
    }),
    async execute({ path, old_text, new_text }, ctx) {
      if (old_text === "") throw new ToolError("old_text is empty; give the exact text to replace");
      const abs = await resolveFilePath(path, policy, ctx);
      const { text } = await readTextFile(abs, path, null);
      const { oldText, newText } = matchLineEndings(text, old_text, new_text);
      const count = countOccurrences(text, oldText);
      if (count === 0) throw new ToolError(notFoundMessage(path, text, old_text));
      if (count > 1) {
        throw new ToolError(
          `old_text appears ${count} times in ${path}. Include more surrounding lines in old_text ` +
            "so that it matches exactly once.",
        );
      }
      const at = text.indexOf(oldText);
      // Spliced by index, not String.replace, so `$&` and friends in new_text stay literal.
      const updated = text.slice(0, at) + newText + text.slice(at + oldText.length);
      try {
        await writeFile(abs, updated, "utf8");
      } catch (err) {
        throw new ToolError(`could not write ${path}: ${errorMessage(err)}`, { cause: err });
      }
      const line = text.slice(0, at).split("\n").length;
      return `Edited ${path}: replaced 1 occurrence at line ${line}.`;
    },
  });
}

function listDirTool(policy: PathPolicy) {
  return defineTool({
    name: "list_dir",
    readOnly: true,
    description: 'List the contents of a directory. Directories are marked with a trailing "/".',
    parameters: z.object({
      path: z.string().describe("The directory path to list (relative to the workspace, or absolute)"),
    }),
    async execute({ path }, ctx) {
      const abs = await resolveFilePath(path, policy, ctx);
      const st = await statOrNull(abs);
      if (!st) throw new ToolError(`directory not found: ${path}`);
      if (!st.isDirectory())
        throw new ToolError(`${path} is a file, not a directory; use read_file to read it`);
      let entries;
      try {
        entries = await readdir(abs, { withFileTypes: true });
      } catch (err) {
        throw new ToolError(`could not list ${path}: ${errorMessage(err)}`, { cause: err });
      }
      if (entries.length === 0) return `(${path} is empty)`;
      entries.sort((a, b) => compareNames(a.name, b.name));
      const shown = entries.slice(0, LIST_DIR_MAX_ENTRIES);
      const lines = await Promise.all(
        shown.map(async (entry) => {
          let isDir = entry.isDirectory();
          // A symlink to a folder is listed as a folder, since the tools follow it.
          if (entry.isSymbolicLink())
            isDir = (await statOrNull(join(abs, entry.name)))?.isDirectory() ?? false;
          return isDir ? `${entry.name}/` : entry.name;
        }),
      );
      if (entries.length > shown.length) {
        lines.push(`[truncated: showing ${shown.length} of ${entries.length} entries]`);
      }
      return lines.join("\n");
    },
  });
}

/** The absolute path, within the workspace policy and not another chat's data. */
async function resolveFilePath(path: string, policy: PathPolicy, ctx: ToolContext): Promise<string> {
  const abs = await resolveToolPath(path, policy);
  await refuseOtherChats(abs, path, policy.workspace, ctx);
  return abs;
}

// ---------------------------------------------------------------- reading

interface TextFile {
  /** The decoded text (possibly only the start of the file, for huge files). */
  text: string;
  /** Characters in the whole file, or null when only its start was read. */
  totalChars: number | null;
  totalBytes: number;
}

/** `maxChars` null: the whole file is needed (editing), so a huge one is refused. */
async function readTextFile(abs: string, shownPath: string, maxChars: number | null): Promise<TextFile> {
  const st = await statOrNull(abs);
  if (!st) throw new ToolError(`file not found: ${shownPath}`);
  if (st.isDirectory())
    throw new ToolError(`${shownPath} is a directory, not a file; use list_dir to see it`);
  if (!st.isFile()) throw new ToolError(`${shownPath} is not a regular file`);

  const whole = st.size <= READ_WHOLE_MAX_BYTES;
  if (!whole && maxChars === null) {
    throw new ToolError(`${shownPath} is too large to edit with edit_file (${st.size} bytes)`);
  }
  // A UTF-8 character is at most 4 bytes, so this many bytes always hold maxChars characters.
  const limit = whole || maxChars === null ? st.size : Math.min(st.size, maxChars * 4 + 4);
  let buf: Buffer;
  try {
    buf = await readStart(abs, limit);
  } catch (err) {
    throw new ToolError(`could not read ${shownPath}: ${errorMessage(err)}`, { cause: err });
  }
  if (looksBinary(buf)) {
    throw new ToolError(
      `${shownPath} looks like a binary file (${st.size} bytes); read_file only reads text. ` +
        "Use exec with a tool such as `file`, `strings` or `xxd` to inspect it.",
    );
  }
  const text = buf.toString("utf8");
  return { text, totalChars: whole ? text.length : null, totalBytes: st.size };
}

async function readStart(path: string, bytes: number): Promise<Buffer> {
  const fh = await open(path, "r");
  try {
    const buf = Buffer.alloc(bytes);
    let filled = 0;
    // Bounded: every read either advances or ends the loop.
    while (filled < bytes) {
      const { bytesRead } = await fh.read(buf, filled, bytes - filled, filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    return buf.subarray(0, filled);
  } finally {
    await fh.close();
  }
}

/** A NUL byte near the start means binary, as git decides it. */
export function looksBinary(buf: Uint8Array): boolean {
  return buf.subarray(0, BINARY_SNIFF_BYTES).includes(0);
}

/**
 * The first `maxChars` characters with a visible notice when cut. Never cuts a
 * surrogate pair in half. `total` describes the whole ("1234 characters").
 */
export function truncateWithNotice(
  text: string,
  maxChars: number,
  total = `${text.length} characters`,
): string {
  if (text.length <= maxChars) return text;
  let end = maxChars;
  const code = text.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end -= 1;
  return `${text.slice(0, end)}\n\n[truncated: showing ${end} of ${total}]`;
}

// ---------------------------------------------------------------- editing

export function countOccurrences(text: string, needle: string): number {
  if (needle === "") return 0;
  let count = 0;
  // Bounded by the text length: each hit moves past the previous one.
  for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + needle.length)) count++;
  return count;
}

/** Models write "\n"; a file written on Windows has "\r\n". Adapt the edit to the file. */
function matchLineEndings(
  text: string,
  oldText: string,
  newText: string,
): { oldText: string; newText: string } {
  if (!text.includes("\r\n") || oldText.includes("\r\n") || !oldText.includes("\n")) {
    return { oldText, newText };
  }
  if (text.includes(oldText)) return { oldText, newText };
  const crlf = (s: string) => s.replace(/\r?\n/g, "\r\n");
  return { oldText: crlf(oldText), newText: crlf(newText) };
}

function notFoundMessage(path: string, text: string, oldText: string): string {
  const head = `old_text was not found in ${path}.`;
  const match = findClosestMatch(text, oldText);
  if (!match || match.score < 0.3) {
    return `${head} Nothing in the file looks similar; read_file it and copy the text exactly.`;
  }
  const pct = Math.min(99, Math.round(match.score * 100));
  const how = match.score >= 0.999 ? "identical except for whitespace" : `${pct}% similar`;
  const lines = text.split("\n").slice(match.start, match.end);
  const shown = lines.slice(0, CLOSEST_MATCH_MAX_LINES);
  const width = String(match.start + shown.length).length;
  const numbered = shown.map(
    (l, i) => `${String(match.start + i + 1).padStart(width)}| ${l.replace(/\r$/, "")}`,
  );
  if (lines.length > shown.length) numbered.push(`… (${lines.length - shown.length} more lines)`);
  return (
    `${head} The closest match is lines ${match.start + 1}-${match.end} (${how}):\n` +
    `${numbered.join("\n")}\n` +
    "Check whitespace, indentation and exact wording, then call edit_file again with old_text copied " +
    "exactly from the file (without the line-number prefixes)."
  );
}

export interface ClosestMatch {
  /** 0-based first line of the window. */
  start: number;
  /** 0-based line after the window. */
  end: number;
  /** 0..1 */
  score: number;
}

/**
 * The window of lines (as many as old_text has) most similar to old_text,
 * scored line by line with the Dice coefficient of character bigrams on
 * trimmed lines, so indentation slips still score high. Null when the file
 * is too large to search in reasonable time.
 */
export function findClosestMatch(text: string, oldText: string): ClosestMatch | null {
  const fileLines = text.split("\n").map((l) => l.replace(/\r$/, ""));
  const wanted = oldText.replace(/\r\n/g, "\n").replace(/\n$/, "").split("\n");
  const k = Math.min(wanted.length, fileLines.length);
  const windows = fileLines.length - k + 1;
  if (k === 0 || windows * k > CLOSEST_MATCH_BUDGET) return null;

  const fileGrams = fileLines.map((l) => bigrams(l.trim()));
  const wantedGrams = wanted.map((l) => bigrams(l.trim()));
  let best: ClosestMatch | null = null;
  for (let start = 0; start < windows; start++) {
    let sum = 0;
    for (let i = 0; i < k; i++) sum += dice(fileGrams[start + i]!, wantedGrams[i]!);
    const score = sum / wanted.length;
    if (!best || score > best.score) best = { start, end: start + k, score };
  }
  return best;
}

type Grams = Map<string, number>;

function bigrams(s: string): Grams {
  const grams: Grams = new Map();
  if (s.length === 1) grams.set(s, 1);
  for (let i = 0; i < s.length - 1; i++) {
    const g = s.slice(i, i + 2);
    grams.set(g, (grams.get(g) ?? 0) + 1);
  }
  return grams;
}

function dice(a: Grams, b: Grams): number {
  if (a.size === 0 && b.size === 0) return 1;
  if (a.size === 0 || b.size === 0) return 0;
  let common = 0;
  let sizeA = 0;
  let sizeB = 0;
  for (const n of a.values()) sizeA += n;
  for (const [g, n] of b) {
    sizeB += n;
    common += Math.min(n, a.get(g) ?? 0);
  }
  return (2 * common) / (sizeA + sizeB);
}

// ---------------------------------------------------------------- helpers

async function statOrNull(path: string) {
  try {
    return await stat(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return null;
    throw new ToolError(`cannot access ${path}: ${errorMessage(err)}`, { cause: err });
  }
}

function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
