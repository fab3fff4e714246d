/**
 * `palaver pairing` and `palaver approvals` in cluster mode (`cluster.database` set): the pairing
 * file and the approval rules are rows of the cluster's database (db/documents.ts), not files of
 * this host's state folder. A command reads the row once, changes it under the row lock, and every
 * running gateway hears of the change by NOTIFY, wherever it runs.
 *
 * A command never migrates: it refuses a database whose schema is not the one it knows, saying
 * what to do (a gateway of this version migrates at its start).
 */
import { PgDocuments } from "../db/documents.js";
import { openDatabase, shownUrl } from "../db/pool.js";
import { SCHEMA_VERSION, schemaVersion } from "../db/schema.js";
import { logger } from "../log.js";
import type { DocumentKind, SharedDocument } from "../util/shared-document.js";

/** Runs `work` on the cluster's document `name`, then closes the connection. */
export async function withClusterDocument<T, R>(
  url: string,
  /** db/documents.ts DOCUMENT_NAMES */
  name: string,
  kind: DocumentKind<T>,
  work: (document: SharedDocument<T>) => R | Promise<R>,
): Promise<R> {
  const log = logger("cluster");
  const db = openDatabase({ url, applicationName: "palaver cli", log, max: 2 });
  try {
    const version = await schemaVersion(db).catch((err: unknown) => {
      throw new Error(
        `cannot reach the cluster database ${shownUrl(url)} (cluster.database): ${String(err)}`,
      );
    });
    if (version !== SCHEMA_VERSION) {
      throw new Error(
        version === 0
          ? `the cluster database ${shownUrl(url)} has no palaver tables yet: start a gateway with this config first (it creates them)`
          : `the cluster database has schema version ${version}, this palaver knows ${SCHEMA_VERSION}: ` +
              "run the same palaver version as the gateways (docs/cluster.md, Upgrades)",
      );
    }
    const documents = new PgDocuments({ db, log });
    const document = documents.document(name, kind);
    await documents.refresh();
    return await work(document);
  } finally {
    await db.end();
  }
}
