/**
 * The cluster's outbox (palaver.outbox): one row per final reply of a turn, numbered within the
 * turn, claimed before it is sent and confirmed after. A turn run again on another instance (its
 * first instance died, or took longer than the turn timeout) produces its replies again; each goes
 * out only if no other attempt claimed it, so the user gets one answer.
 *
 * A row another instance claimed and never confirmed is taken as sent: that instance died (or is
 * still retrying) between its claim and its confirmation, and nearly all of that time is the send
 * itself, after the request left. Sending it again would be a second answer in that window;
 * skipping it loses the reply only if the instance died in the instant between the claim and the
 * request, which the channel manager keeps as short as it can (it claims after the channel's own
 * waits, channels/manager.ts `claimed`).
 */
import type { OutboundMessage } from "../bus/types.js";
import type { Database } from "../db/pool.js";

export class ClusterReplies {
  constructor(
    private readonly db: Database,
    private readonly instance: string,
  ) {}

  /** Whether this reply is this instance's to send: true once, for the first to claim it. */
  async claim(turnId: string, seq: number, msg: OutboundMessage): Promise<boolean> {
    const inserted = await this.db.query(
      `INSERT INTO palaver.outbox (turn_id, seq, channel, chat_id, message, sent_by)
       VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (turn_id, seq) DO NOTHING`,
      [turnId, seq, msg.channel, msg.chatId, JSON.stringify(msg), this.instance],
    );
    return inserted.rowCount === 1;
  }

  async sent(turnId: string, seq: number): Promise<void> {
    await this.db.query(
      "UPDATE palaver.outbox SET state = 'sent', sent_at = now(), sent_by = $3 WHERE turn_id = $1 AND seq = $2",
      [turnId, seq, this.instance],
    );
  }
}
