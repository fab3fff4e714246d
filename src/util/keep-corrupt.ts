/**
 * Where the stores keep what they could not read: the raw text of each bad
 * line (or cron job) appended to `<file>.corrupt` beside the file (0600, as
 * it may hold anything the file held), once per distinct line, so reading a
 * file that keeps its bad line (sessions are append-only) does not grow it on
 * every start. An operator can read it and repair the entry by hand.
 *
 * Merge note: src/util/jsonl.ts (branch i11-journal) keeps lines the same way
 * for the journal; the two should become one helper.
 */
import { appendFile, readFile, stat } from "node:fs/promises";
import type { Logger } from "../log.js";
import { errorMessage } from "./errors.js";

/** A .corrupt file larger than this is not read for de-duplication (appends go on). */
const MAX_DEDUPE_BYTES = 8 * 1024 * 1024;

export function corruptPathOf(path: string): string {
  return `${path}.corrupt`;
}

/** Appends the lines not already there. Failing to keep them is logged, never fatal. */
export async function keepCorrupt(path: string, lines: readonly string[], log: Logger): Promise<void> {
  if (lines.length === 0) return;
  const corruptPath = corruptPathOf(path);
  try {
    const known = await knownLines(corruptPath);
    const fresh = [...new Set(lines)].filter((l) => !known.has(l));
    if (fresh.length) await appendFile(corruptPath, `${fresh.join("\n")}\n`, { mode: 0o600 });
  } catch (err) {
    log.warn({ file: corruptPath, err: errorMessage(err) }, "could not keep the bad lines aside");
  }
}

async function knownLines(corruptPath: string): Promise<Set<string>> {
  try {
    const st = await stat(corruptPath);
    if (st.size > MAX_DEDUPE_BYTES) return new Set();
    return new Set((await readFile(corruptPath, "utf8")).split("\n"));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return new Set();
    throw err;
  }
}
