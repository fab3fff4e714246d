/** `palaver status`'s look at the cluster: the database read once, every wait bounded. */
import type { Logger } from "../log.js";
import { openDatabase, shownUrl } from "../db/pool.js";
import { schemaVersion } from "../db/schema.js";
import { errorMessage } from "../util/errors.js";
import { blockedConversations } from "./turns.js";
import { readClusterView, type ClusterView } from "./view.js";

/** The cluster's view, and the number of sessions it keeps (in the database, not in the workspace). */
export type ClusterReport = (ClusterView & { sessions: number }) | { unavailable: string };

export async function readClusterReport(url: string, log: Logger): Promise<ClusterReport> {
  const db = openDatabase({
    url,
    applicationName: "palaver status",
    log,
    max: 2,
    connectTimeoutMs: 5000,
    statementTimeoutMs: 5000,
  });
  try {
    if ((await schemaVersion(db)) === 0)
      return { unavailable: `${shownUrl(url)} holds no cluster yet: the first gateway started creates it` };
    const view = await readClusterView(db, () => blockedConversations(db));
    const sessions = await db.query<{ n: string }>("SELECT count(*) AS n FROM palaver.sessions");
    return { ...view, sessions: Number(sessions.rows[0]?.n ?? 0) };
  } catch (err) {
    return {
      unavailable: `${shownUrl(url)} does not answer: ${errorMessage(err)} (\`palaver doctor\` checks it)`,
    };
  } finally {
    await db.end().catch(() => undefined);
  }
}
