/**
 * The cluster's outbox (palaver.outbox): one row per final reply of a turn, numbered within the
 * turn. A turn run again on another instance (its first instance died) produces its replies again;
 * each is sent only if no earlier attempt confirmed sending it, so the user gets one answer.
 * A row claimed but never confirmed (its instance died between the send and the confirmation) is
 * sent again: a reply twice in that moment's window is better than none.
 */
import type { OutboundMessage } from "../bus/types.js";
import type { Database } from "../db/pool.js";

export class ClusterReplies {
  constructor(
    private readonly db: Database,
    private readonly instance: string,
  ) {}

  async claim(turnId: string, seq: number, msg: OutboundMessage): Promise<boolean> {
    const inserted = await this.db.query(
      `INSERT INTO palaver.outbox (turn_id, seq, channel, chat_id, message, sent_by)
       VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (turn_id, seq) DO NOTHING`,
      [turnId, seq, msg.channel, msg.chatId, JSON.stringify(msg), this.instance],
    );
    if (inserted.rowCount === 1) return true;
    const row = await this.db.query<{ state: string }>(
      "SELECT state FROM palaver.outbox WHERE turn_id = $1 AND seq = $2",
      [turnId, seq],
    );
    return row.rows[0]?.state === "pending";
  }

  async sent(turnId: string, seq: number): Promise<void> {
    await this.db.query(
      "UPDATE palaver.outbox SET state = 'sent', sent_at = now(), sent_by = $3 WHERE turn_id = $1 AND seq = $2",
      [turnId, seq, this.instance],
    );
  }
}
