/** Workspace files read into a prompt, bounded. */
import { open } from "node:fs/promises";
import { PalaverError, errorMessage } from "./errors.js";

/** Default of agents.defaults.promptFileMaxChars: the most of each file put in the system prompt. */
export const DEFAULT_PROMPT_FILE_MAX_CHARS = 32_000;

/**
 * A workspace file for a prompt: trimmed, and cut at `maxChars` with a notice
 * telling the model how much it sees and where the whole file is (`shownAs`,
 * a path read_file accepts). Never reads more of the file than it needs.
 * Undefined when the file does not exist.
 */
export async function readForPrompt(
  path: string,
  maxChars: number,
  shownAs: string,
): Promise<string | undefined> {
  const part = await readPromptPart(path, maxChars);
  if (!part) return undefined;
  if (!part.truncated) return part.text;
  return (
    `${part.text}\n\n[truncated: ${maxChars} characters of ${part.total} shown; ` +
    `the full file is at ${shownAs}, read it with read_file]`
  );
}

/** What of a file fits a prompt: at most `maxChars` of its trimmed text. */
export interface PromptPart {
  text: string;
  /** Whether the file holds more than `text`. */
  truncated: boolean;
  /** The whole file's size in words ("1234 characters", "10485760 bytes"). */
  total: string;
  /** The file's size on disk. */
  bytes: number;
}

/** The part of a file readForPrompt shows, without the notice; undefined when it does not exist. */
export async function readPromptPart(path: string, maxChars: number): Promise<PromptPart | undefined> {
  const read = await readTextPrefix(path, maxChars);
  if (!read) return undefined;
  const { text, complete, bytes } = read;
  // Only the part that reaches the prompt counts: a long run of blank lines is not "more".
  const body = text.trim();
  if (complete && body.length <= maxChars)
    return { text: body, truncated: false, total: `${body.length} characters`, bytes };
  const total = complete ? `${body.length} characters` : `${bytes} bytes`;
  return { text: body.slice(0, maxChars), truncated: true, total, bytes };
}

/**
 * The start of a text file, enough for `maxChars` UTF-16 characters (3 bytes
 * each at most in UTF-8), without reading a huge file whole. `complete` says
 * whether that was the whole file; `bytes` is its size.
 */
async function readTextPrefix(
  path: string,
  maxChars: number,
): Promise<{ text: string; complete: boolean; bytes: number } | undefined> {
  // Leading whitespace is trimmed later, so leave room for a little of it.
  const limit = maxChars * 3 + 1024;
  try {
    const fh = await open(path, "r");
    try {
      const { size } = await fh.stat();
      const buf = Buffer.alloc(Math.min(size, limit));
      const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
      // A multi-byte character cut at the end decodes to U+FFFD; it is past maxChars anyway.
      return { text: buf.subarray(0, bytesRead).toString("utf8"), complete: size <= limit, bytes: size };
    } finally {
      await fh.close();
    }
  } catch (err) {
    if (typeof err === "object" && err !== null && (err as { code?: unknown }).code === "ENOENT") {
      return undefined;
    }
    throw new PalaverError(`cannot read ${path}: ${errorMessage(err)}`, { cause: err });
  }
}
