/**
 * Cluster mode wants one workspace shared by every instance (a network or cluster filesystem):
 * a file the agent writes on one host must be there for a turn that runs on another. At start each
 * instance checks it: the first one writes a random id into `<workspace>/.palaver-cluster`, then
 * into palaver.meta; the others compare the file they see with the database's. A missing or
 * different file means this host has a workspace of its own, and that is said loudly (the instance
 * still runs: the chats work, only files are not shared).
 */
import { randomUUID } from "node:crypto";
import { link, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "../log.js";
import { errorMessage } from "../util/errors.js";
import type { Database } from "./pool.js";

export const MARKER_FILE = ".palaver-cluster";
const META_KEY = "workspace_marker";

export type WorkspaceCheck =
  /** This instance set the marker up (the first of the cluster, or the file was there already). */
  | { kind: "created"; id: string }
  | { kind: "same"; id: string }
  | { kind: "missing"; expected: string }
  | { kind: "different"; expected: string; found: string };

/** What the file and the database say, judged (pure). */
export function judgeMarker(expected: string, found: string | null): WorkspaceCheck {
  if (found === null) return { kind: "missing", expected };
  return found === expected ? { kind: "same", id: expected } : { kind: "different", expected, found };
}

/** The warning for a workspace that is not the cluster's (null: nothing to warn of). */
export function markerWarning(check: WorkspaceCheck, workspace: string): string | null {
  if (check.kind === "created" || check.kind === "same") return null;
  const path = join(workspace, MARKER_FILE);
  const what =
    check.kind === "missing"
      ? `${path} does not exist here`
      : `${path} holds ${check.found}, another cluster's or another folder's marker`;
  return (
    `cluster: this instance does not see the cluster's shared workspace (${what}; the cluster's marker is ` +
    `${check.expected}). Files the agent writes here are invisible to the other instances, and theirs to this ` +
    `one: a conversation whose turns run on different hosts loses its files. Mount the same shared folder ` +
    `(NFS, CephFS, ...) at agents.defaults.workspace on every host. If this folder IS the shared workspace ` +
    `(restored from a backup, moved), write the marker into it: echo ${check.expected} > ${path}`
  );
}

/**
 * Checks this instance's workspace against the cluster's marker (setting both up when the cluster
 * has none yet) and logs a loud warning when they differ. Returns the verdict for status.
 */
export async function checkWorkspaceMarker(
  db: Pick<Database, "query">,
  workspace: string,
  log: Logger,
): Promise<WorkspaceCheck> {
  const path = join(workspace, MARKER_FILE);
  // The database first: an instance that set it up wrote the file before, so a shared folder has it.
  const known = await metaMarker(db);
  let check: WorkspaceCheck;
  if (known === null) {
    // The first instance (or one of several starting together): the file first, then the database,
    // which keeps the first id it is given. A marker already there (the database was recreated) is kept.
    await createMarker(path, randomUUID()).catch((err: unknown) =>
      log.debug({ err: errorMessage(err) }, "cluster: workspace marker not written"),
    );
    const found = await readMarker(path, log);
    await db.query("INSERT INTO palaver.meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING", [
      META_KEY,
      found ?? randomUUID(),
    ]);
    const expected = (await metaMarker(db)) ?? "";
    check = found === expected ? { kind: "created", id: expected } : judgeMarker(expected, found);
  } else {
    check = judgeMarker(known, await readMarker(path, log));
  }
  const warning = markerWarning(check, workspace);
  if (warning) log.error({ workspace, marker: check }, warning);
  return check;
}

/**
 * Writes the marker only if there is none, whole or not at all: written aside, then linked into
 * place (a link fails when the name exists), so an instance reading at the same moment never sees
 * it empty, and of several writing at once one wins (all write the same id anyway).
 */
async function createMarker(path: string, id: string): Promise<void> {
  const aside = `${path}.${randomUUID()}.tmp`;
  try {
    await writeFile(aside, `${id}\n`, { flag: "wx" });
    await link(aside, path);
  } finally {
    await rm(aside, { force: true });
  }
}

async function metaMarker(db: Pick<Database, "query">): Promise<string | null> {
  const rows = await db.query<{ value: string }>("SELECT value FROM palaver.meta WHERE key = $1", [META_KEY]);
  return rows.rows[0]?.value ?? null;
}

/** The marker's id, or null when the file is not there (or cannot be read: said in the log). */
async function readMarker(path: string, log: Logger): Promise<string | null> {
  try {
    const text = (await readFile(path, "utf8")).trim();
    return text === "" ? null : text;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT")
      log.warn({ path, err: errorMessage(err) }, "cluster: the workspace marker cannot be read");
    return null;
  }
}
