/**
 * The web chat's token in a cluster: one row of palaver.documents, so every instance serves the
 * same token and accepts the same cookie (auth.ts signs the cookie with the token). The first
 * instance to start offers its own (the token of its state folder, kept from one-process days,
 * or a new one); the others take that.
 */
import type { Database } from "../../db/pool.js";
import type { SharedToken } from "./auth.js";

/** Its row in palaver.documents: the token file's path in the state folder; the value is the token as a JSON string. */
const DOCUMENT = "web/token";

export class PgSharedToken implements SharedToken {
  constructor(private readonly db: Pick<Database, "query">) {}

  async agree(candidate: string): Promise<string> {
    await this.db.query(
      "INSERT INTO palaver.documents (name, value) VALUES ($1, to_jsonb($2::text)) ON CONFLICT (name) DO NOTHING",
      [DOCUMENT, candidate],
    );
    // A statement of its own: it sees the row whichever instance's insert won.
    const row = await this.db.query<{ token: string | null }>(
      "SELECT value #>> '{}' AS token FROM palaver.documents WHERE name = $1",
      [DOCUMENT],
    );
    const token = row.rows[0]?.token;
    if (!token)
      throw new Error(`palaver.documents "${DOCUMENT}" holds no token: delete that row and restart`);
    return token;
  }
}
