/**
 * Node's built-in SQLite (`node:sqlite`, Node >= 22.13): no native dependency to build. Loaded with
 * `process.getBuiltinModule`, so on a Node without it palaver starts without memory search instead
 * of failing to load. The types are the small part of its API palaver uses (@types/node 20 has none).
 */

export type SqlValue = string | number | bigint | null | Uint8Array;

export interface Statement {
  run(...params: SqlValue[]): { changes: number | bigint; lastInsertRowid: number | bigint };
  get(...params: SqlValue[]): Record<string, unknown> | undefined;
  all(...params: SqlValue[]): Record<string, unknown>[];
  /** Row by row, for a scan that must not hold every row at once. */
  iterate(...params: SqlValue[]): IterableIterator<Record<string, unknown>>;
}

export interface Database {
  exec(sql: string): void;
  prepare(sql: string): Statement;
  close(): void;
}

interface SqliteModule {
  DatabaseSync: new (path: string) => Database;
}

/** The module, or why there is none (said once in the log and by `palaver memory status`). */
export function loadSqlite(): { sqlite: SqliteModule } | { missing: string } {
  try {
    const mod = withoutSqliteWarning(() => process.getBuiltinModule("node:sqlite")) as
      SqliteModule | undefined;
    if (mod?.DatabaseSync) return { sqlite: mod };
  } catch {
    // an older Node throws for an unknown id instead of returning undefined
  }
  return {
    missing: `memory search needs Node.js 22.13 or newer (node:sqlite); this is ${process.version}`,
  };
}

/**
 * Runs `load` with Node 22's one-time "SQLite is an experimental feature" warning left out: it
 * would be two more lines on stderr for every command that opens the index, where palaver promises
 * one line per error (Node 24 no longer prints it). Every other warning goes through as usual.
 */
function withoutSqliteWarning<T>(load: () => T): T {
  const emitWarning = process.emitWarning.bind(process);
  const quiet = (warning: string | Error, ...rest: unknown[]): void => {
    const type = typeof rest[0] === "string" ? rest[0] : (rest[0] as { type?: string } | undefined)?.type;
    if (type === "ExperimentalWarning" && String(warning).includes("SQLite")) return;
    Reflect.apply(emitWarning, process, [warning, ...rest]);
  };
  process.emitWarning = quiet;
  try {
    return load();
  } finally {
    process.emitWarning = emitWarning;
  }
}
