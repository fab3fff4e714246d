/**
 * The tool-call journal of cluster mode: table `palaver.tool_calls` (db/schema.ts), one row per
 * side-effecting call of a turn, keyed by the turn's inbound row and the call key
 * (agent/tool-replay.ts). The same replay rules as the file journal (tool-journal.ts), across
 * instances: a turn whose instance died is run again on another, which loads the turn's rows and
 * reuses what the first run did.
 *
 * Differences from the file journal, and why:
 * - "started" is committed before the call runs, and is a claim: INSERT ... ON CONFLICT DO NOTHING.
 *   When the row is already there, another run of the same turn (a turn taken up again while its
 *   first run still went on) holds the call, and this run gets what that one recorded instead.
 * - A failed write refuses the call (the model is told, tool-replay.ts notRecordedText) instead of
 *   running it anyway: in a cluster the turn itself commits to this same database, so when the
 *   record cannot be written the turn will most likely be run again, and an unrecorded call would
 *   then run twice. A failed load (forTurn) fails the turn for the same reason.
 * - Rows are kept for `keepForMs` (a day) after their turn ended, not deleted at its end: a second
 *   run of a turn may still be going when the first one ends, and must still find the claims.
 *   endTurn deletes the rows of turns that ended (inbound row done, or gone) longer ago than that.
 *
 * The gateway (cluster mode) passes the inbound row id of a turn as `msg.journalId`, in decimals.
 */
import {
  callSlot,
  type CallKey,
  type RecalledCall,
  type ToolCallJournal,
  type TurnCallRecord,
} from "../agent/tool-replay.js";
import type { TurnState } from "../agent/tools/types.js";
import type { InboundMessage } from "../bus/types.js";
import type { Database } from "../db/pool.js";
import type { Logger } from "../log.js";

export interface PgToolJournalOptions {
  db: Database;
  log: Logger;
  /** How long the rows of an ended turn are kept; must exceed the longest a turn can run. */
  keepForMs?: number;
  /** endTurn's cleanup runs at most this often. */
  pruneEveryMs?: number;
}

interface CallRow {
  name: string;
  args: string;
  n: number;
  state: "started" | "done";
  result: string | null;
  turn_state: Partial<TurnState> | null;
}

const DAY_MS = 24 * 60 * 60 * 1000;

export class PgToolJournal implements ToolCallJournal {
  private readonly db: Database;
  private readonly log: Logger;
  private readonly keepForMs: number;
  private readonly pruneEveryMs: number;
  private lastPrune = 0;

  constructor(opts: PgToolJournalOptions) {
    this.db = opts.db;
    this.log = opts.log;
    this.keepForMs = opts.keepForMs ?? DAY_MS;
    this.pruneEveryMs = opts.pruneEveryMs ?? 60_000;
  }

  async forTurn(msg: InboundMessage): Promise<TurnCallRecord | undefined> {
    if (msg.journalId === undefined) return undefined;
    const turn = inboundIdOf(msg.journalId);
    const { rows } = await this.db.query<CallRow>(
      `SELECT name, args, n, state, result, turn_state FROM palaver.tool_calls WHERE inbound_id = $1`,
      [turn],
    );
    const calls = new Map<string, RecalledCall>(rows.map((row) => [callSlot(row), recalledOf(row)]));
    return {
      recall: (key) => calls.get(callSlot(key)),
      started: async (key) => {
        const earlier = await this.claim(turn, key);
        calls.set(callSlot(key), earlier ?? { state: "started" });
        return earlier;
      },
      done: async (key, result, turnState) => {
        calls.set(callSlot(key), { state: "done", result, turn: turnState });
        await this.finish(turn, key, result, turnState);
      },
    };
  }

  /**
   * The turn has ended: its rows stay for `keepForMs` (see the header). Deletes, at most once per
   * `pruneEveryMs`, the rows of turns that ended longer ago than that. Never throws.
   */
  async endTurn(_turn: string): Promise<void> {
    const now = Date.now();
    if (now - this.lastPrune < this.pruneEveryMs) return;
    this.lastPrune = now;
    try {
      await this.db.query(
        `DELETE FROM palaver.tool_calls t
          WHERE t.recorded_at < now() - $1::double precision * interval '1 millisecond'
            AND NOT EXISTS (
              SELECT 1 FROM palaver.inbound i
               WHERE i.id = t.inbound_id
                 AND (i.state <> 'done' OR i.done_at >= now() - $1::double precision * interval '1 millisecond'))`,
        [this.keepForMs],
      );
    } catch (err) {
      this.log.warn({ err }, "tool journal: could not delete the calls of old turns; trying again later");
    }
  }

  /** Undefined when this run now holds the call; what is recorded when another run got it first. */
  private async claim(turn: string, key: CallKey): Promise<RecalledCall | undefined> {
    try {
      const inserted = await this.db.query(
        `INSERT INTO palaver.tool_calls (inbound_id, name, args, n, state) VALUES ($1, $2, $3, $4, 'started')
         ON CONFLICT DO NOTHING`,
        [turn, key.name, key.args, key.n],
      );
      if (inserted.rowCount === 1) return undefined;
      const { rows } = await this.db.query<CallRow>(
        `SELECT name, args, n, state, result, turn_state FROM palaver.tool_calls
          WHERE inbound_id = $1 AND name = $2 AND args = $3 AND n = $4`,
        [turn, key.name, key.args, key.n],
      );
      // Deleted between the two statements only if the turn ended long ago: treat it as started.
      return rows[0] ? recalledOf(rows[0]) : { state: "started" };
    } catch (err) {
      this.log.warn(
        { err, turn, tool: key.name },
        "tool journal: could not record a tool call in the cluster database; the call was not run",
      );
      throw err;
    }
  }

  private async finish(
    turn: string,
    key: CallKey,
    result: string,
    turnState: Partial<TurnState>,
  ): Promise<void> {
    try {
      await this.db.query(
        `UPDATE palaver.tool_calls SET state = 'done', result = $5, turn_state = $6, recorded_at = now()
          WHERE inbound_id = $1 AND name = $2 AND args = $3 AND n = $4`,
        [turn, key.name, key.args, key.n, result, Object.keys(turnState).length ? turnState : null],
      );
    } catch (err) {
      // The row stays "started": a replay tells the model the call may have happened, never runs it again.
      this.log.warn(
        { err, turn, tool: key.name },
        "tool journal: could not record a tool call's result; a replay of this turn will not reuse it",
      );
    }
  }
}

/** The inbound row id the gateway gives a turn in cluster mode. */
function inboundIdOf(journalId: string): string {
  if (!/^[1-9][0-9]{0,18}$/.test(journalId)) {
    throw new Error(
      `tool journal: the turn's journal id "${journalId}" is not an inbound row id; ` +
        "in cluster mode the gateway must pass the palaver.inbound id",
    );
  }
  return journalId;
}

function recalledOf(row: CallRow): RecalledCall {
  return row.state === "done"
    ? { state: "done", result: row.result ?? "", turn: row.turn_state ?? {} }
    : { state: "started" };
}
