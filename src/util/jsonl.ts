/**
 * Reading JSONL files that palaver wrote earlier (journal, sessions, cron
 * store) without trusting them: a crash can tear the last line, a person can
 * edit the file, an older or newer version can write a shape this one does
 * not know. One bad line must never stop the daemon (systemd would restart it
 * into the same crash forever), and it must never be silently lost either.
 *
 * So every line is parsed and validated with a zod schema; a line that is not
 * JSON, or is JSON of the wrong shape, is skipped with a warning and its raw
 * text appended to `<file>.corrupt` beside the file, where an operator can
 * read it and repair it by hand. The same line is kept only once there, so
 * reading a file that is never rewritten (sessions) does not grow it on every
 * start.
 */
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import type { Logger } from "pino";
import type { z } from "zod";
import { errorMessage } from "./errors.js";

export interface ReadJsonlOptions {
  /** Where skipped lines are reported (util/ sits below log.ts, so the caller hands its logger). */
  log: Logger;
  /** Where skipped lines are kept; default `<path>.corrupt`. */
  corruptPath?: string;
  /** What the file is, for log lines ("journal", "session"); default "file". */
  what?: string;
}

export interface JsonlResult<T> {
  /** The valid lines, parsed, in file order. */
  values: T[];
  /** How many non-blank lines were skipped (and kept in the .corrupt file). */
  skipped: number;
}

/** Warnings per file before the rest are only counted, so a garbage file does not flood the log. */
const MAX_LINE_WARNINGS = 5;

/**
 * Reads `path` (a missing file is empty) and returns its lines that parse and
 * match `schema`. Bad lines are skipped, warned about and kept in
 * `<path>.corrupt`. Never throws for bad content; throws only when the file
 * exists but cannot be read.
 *
 * @example
 *   const { values } = readJsonl(file, EntrySchema, { log, what: "journal" });
 */
export function readJsonl<S extends z.ZodType>(
  path: string,
  schema: S,
  opts: ReadJsonlOptions,
): JsonlResult<z.output<S>> {
  if (!existsSync(path)) return { values: [], skipped: 0 };
  return parseJsonl(readFileSync(path, "utf8"), schema, { ...opts, source: path });
}

/** Like {@link readJsonl} for text already in memory; `source` names the file (the .corrupt file goes beside it). */
export function parseJsonl<S extends z.ZodType>(
  text: string,
  schema: S,
  opts: ReadJsonlOptions & { source: string },
): JsonlResult<z.output<S>> {
  const log = opts.log;
  const what = opts.what ?? "file";
  const values: z.output<S>[] = [];
  const bad: string[] = [];
  text.split("\n").forEach((raw, index) => {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (!line.trim()) return;
    const problem = check(line, schema, values);
    if (problem === undefined) return;
    bad.push(line);
    if (bad.length <= MAX_LINE_WARNINGS) {
      log.warn({ file: opts.source, line: index + 1, problem }, `${what}: skipping a bad line`);
    }
  });
  if (bad.length === 0) return { values, skipped: 0 };
  const corruptPath = opts.corruptPath ?? corruptPathOf(opts.source);
  keepCorrupt(corruptPath, bad, log);
  log.warn(
    { file: opts.source, skipped: bad.length, keptIn: corruptPath },
    `${what}: skipped ${bad.length} bad line(s); they are kept in ${corruptPath}`,
  );
  return { values, skipped: bad.length };
}

/** Pushes the parsed line onto `values`, or returns why it is bad. */
function check<S extends z.ZodType>(line: string, schema: S, values: z.output<S>[]): string | undefined {
  let json: unknown;
  try {
    json = JSON.parse(line);
  } catch {
    return "not JSON (a line torn by a crash, or edited by hand)";
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? issue.path.join(".") : "(line)";
    return `wrong shape: ${where}: ${issue?.message ?? "invalid"}`;
  }
  values.push(parsed.data);
  return undefined;
}

/** Where the bad lines of `path` are kept. */
export function corruptPathOf(path: string): string {
  return `${path}.corrupt`;
}

/**
 * Appends the lines not already in the .corrupt file (0600: it may hold
 * anything the file held). Failing to keep them is logged, never fatal.
 */
export function keepCorrupt(corruptPath: string, lines: readonly string[], log: Logger): void {
  if (lines.length === 0) return;
  try {
    const known = existsSync(corruptPath)
      ? new Set(readFileSync(corruptPath, "utf8").split("\n"))
      : new Set();
    const fresh = [...new Set(lines)].filter((l) => !known.has(l));
    if (fresh.length) appendFileSync(corruptPath, `${fresh.join("\n")}\n`, { mode: 0o600 });
  } catch (err) {
    log.warn({ file: corruptPath, err: errorMessage(err) }, "could not keep the bad lines aside");
  }
}
