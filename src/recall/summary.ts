/**
 * What memory search is doing, in words: one line for `/status` and `palaver status`, and the
 * embeddings' state for `palaver memory status`. `readIndexSummary` reads the index file as it
 * is, from another process than the gateway's, without indexing anything.
 */
import { existsSync, statSync } from "node:fs";
import { FAILING_KEY, readFailure, type EmbeddingsState } from "./embedding.js";
import { errorMessage } from "../util/errors.js";
import { loadSqlite, type Database } from "./sqlite.js";

export interface IndexSummary {
  pieces: number;
  bytesOnDisk: number;
  updatedAt: string | undefined;
  embeddings: EmbeddingsState;
}

/** The embeddings' state in words; a failure says plainly that search uses full text alone. */
export function describeEmbeddings(e: EmbeddingsState, pieces: number): string {
  if (e.state === "off") return "embeddings off (full text, BM25)";
  if (e.failing)
    return (
      `embeddings with ${e.model} FAILING since ${e.failing.since} (${e.failing.reason}): ` +
      "searching by full text (BM25) only"
    );
  return `embeddings ${e.model}, ${Math.min(e.embedded, pieces)} of ${pieces} pieces embedded`;
}

/** One line: pieces, size, last update, embeddings. */
export function summaryLine(s: IndexSummary): string {
  return (
    `${s.pieces} pieces indexed, ${(s.bytesOnDisk / 1e6).toFixed(1)} MB, ` +
    `updated ${s.updatedAt ?? "never"}; ${describeEmbeddings(s.embeddings, s.pieces)}`
  );
}

/**
 * The index file's summary, or why there is none (not built yet, no node:sqlite, unreadable).
 * `model`: the configured embedding model (its vectors are counted), absent when embeddings are off.
 */
export function readIndexSummary(indexPath: string, model: string | undefined): IndexSummary | string {
  if (!existsSync(indexPath)) return "no index yet (built when the gateway starts)";
  const loaded = loadSqlite();
  if ("missing" in loaded) return loaded.missing;
  let db: Database | undefined;
  try {
    const open = new loaded.sqlite.DatabaseSync(indexPath);
    db = open;
    const pieces = Number(db.prepare("SELECT COUNT(*) AS n FROM docs").get()?.n ?? 0);
    const meta = (k: string) => {
      const v = open.prepare("SELECT v FROM meta WHERE k = ?").get(k)?.v;
      return typeof v === "string" ? v : undefined;
    };
    let embeddings: EmbeddingsState = { state: "off" };
    if (model) {
      const embedded = Number(
        db.prepare("SELECT COUNT(*) AS n FROM vecs WHERE model = ?").get(model)?.n ?? 0,
      );
      const failing = readFailure(meta(FAILING_KEY), model);
      embeddings = { state: "on", model, embedded, ...(failing ? { failing } : {}) };
    }
    let bytesOnDisk = 0;
    for (const suffix of ["", "-wal"])
      bytesOnDisk += existsSync(indexPath + suffix) ? statSync(indexPath + suffix).size : 0;
    return { pieces, bytesOnDisk, updatedAt: meta("updated"), embeddings };
  } catch (err) {
    return `the index cannot be read (${errorMessage(err)}); the gateway rebuilds it at its next start`;
  } finally {
    db?.close();
  }
}
