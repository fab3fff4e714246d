/**
 * The shared state documents of a cluster (util/shared-document.ts), one row each in
 * palaver.documents: `value` is exactly what the state file would hold (the same zod schema reads
 * both), `version` counts its changes.
 *
 * Reading is synchronous from a copy in memory. The copy follows the row: every change is
 * announced with NOTIFY on DOCUMENTS_CHANNEL (sent by PostgreSQL at commit), which the instance's
 * Notifier (db/notify.ts) receives; the whole set is also re-read every `refreshMs` and when the
 * Notifier reconnects, so a notification lost with a broken connection delays a change, never
 * loses it. A change is one transaction holding the row with SELECT ... FOR UPDATE: two
 * instances changing the same document run one after the other, each on the other's result.
 *
 * A row that does not match its schema (written by hand, or by a newer palaver) reads as empty,
 * with a warning; the first change copies it aside, to `<name>.corrupt-<ms>`, as the state files do.
 */
import type { z } from "zod";
import type { Logger } from "../log.js";
import { errorMessage } from "../util/errors.js";
import type { DocumentChange, DocumentKind, SharedDocument } from "../util/shared-document.js";
import { jsonPayload, notifyAtCommit, type Notifier } from "./notify.js";
import { inTransaction, type Database, type DatabaseClient } from "./pool.js";

/** The NOTIFY channel of document changes; the payload is `{"name": ..., "version": ...}`. */
export const DOCUMENTS_CHANNEL = "palaver_documents";

export { DOCUMENT_NAMES } from "./names.js";

export interface DocumentsOptions {
  db: Database;
  log: Logger;
  /** The fallback re-read of every document (default 5 s). */
  refreshMs?: number;
}

interface Row {
  name: string;
  value: unknown;
  version: string;
}

/** The documents of one instance, kept current by its Notifier and one periodic re-read. */
export class PgDocuments {
  private readonly documents = new Map<string, PgDocument<unknown>>();
  private timer: NodeJS.Timeout | null = null;
  private stopped = true;
  /** The notifier listened on: its handlers stay (it cannot drop them), muted while stopped. */
  private listening: Notifier | null = null;
  private readonly refreshMs: number;

  constructor(private readonly opts: DocumentsOptions) {
    this.refreshMs = opts.refreshMs ?? 5000;
  }

  /** The document `name` (one object per name). Its value is empty until start() has read it. */
  document<T>(name: string, opts: DocumentKind<T>): PgDocument<T> {
    const known = this.documents.get(name);
    // One object per name: every caller of a name passes the same kind.
    if (known) return known as PgDocument<T>;
    const doc = new PgDocument<T>(name, this.opts.db, opts, this.opts.log);
    this.documents.set(name, doc);
    if (!this.stopped) void this.refreshQuietly([name]);
    return doc;
  }

  /**
   * Listens for changes through `notifier` (the instance's) and reads every document; resolves
   * once they are read. A LISTEN that fails now is the notifier's to retry: it re-reads then.
   */
  async start(notifier: Notifier): Promise<void> {
    if (!this.stopped) return;
    this.stopped = false;
    if (this.listening !== notifier) {
      this.listening = notifier;
      notifier.onReconnect(() => {
        if (!this.stopped && this.listening === notifier) void this.refreshQuietly();
      });
      await notifier
        .listen(DOCUMENTS_CHANNEL, (payload) => {
          if (!this.stopped && this.listening === notifier) this.notified(payload);
        })
        .catch((err: unknown) =>
          this.opts.log.warn(
            { err: errorMessage(err) },
            "database: cannot listen for document changes yet; the notifier retries",
          ),
        );
    }
    await this.refresh();
    this.timer = setInterval(() => void this.refreshQuietly(), this.refreshMs);
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Re-reads the named documents (default all) from the database. */
  async refresh(names: readonly string[] = [...this.documents.keys()]): Promise<void> {
    if (names.length === 0) return;
    const { rows } = await this.opts.db.query<Row>(
      "SELECT name, value, version FROM palaver.documents WHERE name = ANY($1)",
      [names],
    );
    for (const row of rows) this.documents.get(row.name)?.accept(row.value, Number(row.version));
  }

  private async refreshQuietly(names?: readonly string[]): Promise<void> {
    try {
      await this.refresh(names);
    } catch (err) {
      this.opts.log.warn({ err: errorMessage(err) }, "database: cannot re-read the shared documents");
    }
  }

  private notified(payload: string): void {
    const change = (jsonPayload(payload) ?? {}) as { name?: unknown; version?: unknown };
    const doc = typeof change.name === "string" ? this.documents.get(change.name) : undefined;
    if (doc && (typeof change.version !== "number" || change.version > doc.version))
      void this.refreshQuietly([change.name as string]);
  }
}

/** One shared document (see the header). Made by PgDocuments.document. */
export class PgDocument<T> implements SharedDocument<T> {
  private value: T;
  /** The row's version the copy holds; 0 before there is a row. */
  version = 0;
  /** The version last handed out by read() or update(), for changed(). */
  private seen = 0;
  private warnedVersion = 0;
  private readonly listeners = new Set<() => void>();

  constructor(
    readonly name: string,
    private readonly db: Database,
    private readonly opts: DocumentKind<T>,
    private readonly log: Logger,
  ) {
    this.value = opts.empty();
  }

  read(): T {
    this.seen = this.version;
    return this.value;
  }

  changed(): boolean {
    return this.version !== this.seen;
  }

  watch(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async update<R>(change: DocumentChange<T, R>): Promise<R> {
    const outcome = await inTransaction(this.db, async (client) => {
      // The row must exist to be locked; the first change of a document makes it.
      await client.query(
        "INSERT INTO palaver.documents (name, value) VALUES ($1, $2::jsonb) ON CONFLICT (name) DO NOTHING",
        [this.name, JSON.stringify(this.opts.empty())],
      );
      const { rows } = await client.query<Row>(
        "SELECT name, value, version FROM palaver.documents WHERE name = $1 FOR UPDATE",
        [this.name],
      );
      const row = rows[0]!;
      const current = await this.currentOf(client, row);
      const { next, result } = change(current);
      if (next === undefined) return { result, value: current, version: Number(row.version) };
      const written = await client.query<{ version: string }>(
        `UPDATE palaver.documents SET value = $2::jsonb, version = version + 1, updated_at = now()
         WHERE name = $1 RETURNING version`,
        [this.name, JSON.stringify(next)],
      );
      const version = Number(written.rows[0]!.version);
      await notifyAtCommit(client, DOCUMENTS_CHANNEL, JSON.stringify({ name: this.name, version }));
      return { result, value: next, version };
    });
    this.accept(outcome.value, outcome.version, true);
    this.seen = this.version;
    return outcome.result;
  }

  /** A value read from the row, taken when it is newer than the copy's. */
  accept(raw: unknown, version: number, parsed = false): void {
    if (version <= this.version) return;
    this.value = parsed ? (raw as T) : this.parse(raw, version);
    this.version = version;
    for (const listener of this.listeners) listener();
  }

  private parse(raw: unknown, version: number): T {
    const parsed = this.opts.schema.safeParse(raw);
    if (parsed.success) return parsed.data;
    if (this.warnedVersion !== version) {
      this.warnedVersion = version;
      this.log.warn(
        { document: this.name, problem: problemOf(parsed.error) },
        `${this.opts.what} in the database is not valid; reading it as empty until it is changed`,
      );
    }
    return this.opts.empty();
  }

  /** The locked row's value; one that is not valid is copied aside and the change starts from empty. */
  private async currentOf(client: DatabaseClient, row: Row): Promise<T> {
    const parsed = this.opts.schema.safeParse(row.value);
    if (parsed.success) return parsed.data;
    const aside = `${this.name}.corrupt-${Date.now()}`;
    await client.query(
      "INSERT INTO palaver.documents (name, value) VALUES ($1, $2::jsonb) ON CONFLICT (name) DO NOTHING",
      [aside, JSON.stringify(row.value)],
    );
    this.log.warn(
      { document: this.name, movedTo: aside, problem: problemOf(parsed.error) },
      `${this.opts.what} in the database is not valid; copied it aside and starting ${this.opts.startsAs ?? "empty"}`,
    );
    return this.opts.empty();
  }
}

function problemOf(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.join(".") || "(top level)"}: ${i.message}`).join("; ");
}
