/**
 * Cluster mode's side of the manager's delivery: a turn's final replies numbered in the order they
 * are routed, each claimed in the cluster's outbox (cluster/replies.ts) before it goes out and
 * confirmed after, so a turn run again on another instance does not answer twice.
 */
import type { OutboundMessage } from "../bus/types.js";
import type { Logger } from "../log.js";

/** The cluster's record of a turn's final replies. */
export interface SentOnce {
  /** Before the `seq`th final reply of turn `turnId` goes out: false when another attempt of the turn claimed it. */
  claim(turnId: string, seq: number, msg: OutboundMessage): Promise<boolean>;
  sent(turnId: string, seq: number): Promise<void>;
}

/** A reply's place among its turn's final replies. */
export interface FinalPlace {
  turnId: string;
  seq: number;
}

export class TurnFinals {
  /** Final replies routed so far per running turn. */
  private readonly routed = new Map<string, number>();

  constructor(
    private readonly record: SentOnce,
    private readonly log: Logger,
  ) {}

  /** The place of the next final reply of the turn `msg` belongs to; none without a turn. */
  number(msg: OutboundMessage): FinalPlace | undefined {
    if (!msg.turnId) return undefined;
    const seq = (this.routed.get(msg.turnId) ?? 0) + 1;
    this.routed.set(msg.turnId, seq);
    return { turnId: msg.turnId, seq };
  }

  /** The turn ended: its numbering is done with. */
  turnEnded(turnId: string): void {
    this.routed.delete(turnId);
  }

  /** Whether this reply may go out; when the record cannot be read, it goes out (better twice than never). */
  async claim(place: FinalPlace, msg: OutboundMessage): Promise<boolean> {
    try {
      return await this.record.claim(place.turnId, place.seq, msg);
    } catch (err) {
      this.log.warn(
        { err, turnId: place.turnId },
        "could not check whether this reply was sent already; sending it",
      );
      return true;
    }
  }

  confirm(place: FinalPlace): void {
    this.record
      .sent(place.turnId, place.seq)
      .catch((err: unknown) =>
        this.log.warn({ err, turnId: place.turnId }, "could not record a reply as sent"),
      );
  }
}
