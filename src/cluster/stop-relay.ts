/**
 * /stop in a cluster: the conversation's turn may run on another instance than the one the /stop
 * reached. Stopped here when it runs here; else, when the database says a turn of the conversation
 * runs, the /stop is passed to every instance (LISTEN/NOTIFY) and the one running it stops it and
 * answers; else it is answered here ("Nothing is running", and this instance's background tasks of
 * the chat are cancelled).
 */
import type { InboundMessage } from "../bus/types.js";
import { sessionKeyOf } from "../bus/types.js";
import { InboundSchema } from "../daemon/journal-entries.js";
import { jsonPayload, type Notifier } from "../db/notify.js";
import type { Database } from "../db/pool.js";
import type { Logger } from "../log.js";
import { errorMessage } from "../util/errors.js";

const CHANNEL = "palaver_stop";

export interface StopRelayOptions {
  db: Database;
  notifier: Notifier;
  log: Logger;
  /** Whether this instance runs a turn of the conversation now. */
  runsHere: (sessionKey: string) => boolean;
  /** Stops and answers here (AgentLoop.answerNow with the /stop). */
  stopHere: (msg: InboundMessage) => void;
  /** The /stop went to the other instances: this one is done with it (its local journal entry). */
  passedOn: (msg: InboundMessage) => void;
}

export class StopRelay {
  constructor(private readonly opts: StopRelayOptions) {}

  /** Listens for /stops passed on by the other instances. */
  async start(): Promise<void> {
    await this.opts.notifier.listen(CHANNEL, (payload) => {
      const parsed = InboundSchema.safeParse(jsonPayload(payload));
      if (!parsed.success) return;
      if (this.opts.runsHere(sessionKeyOf(parsed.data))) this.opts.stopHere(parsed.data);
    });
  }

  /** A /stop that reached this instance. */
  async stop(msg: InboundMessage): Promise<void> {
    const key = sessionKeyOf(msg);
    if (this.opts.runsHere(key)) return this.opts.stopHere(msg);
    try {
      const running = await this.opts.db.query(
        "SELECT 1 FROM palaver.inbound WHERE session_key = $1 AND state = 'running' LIMIT 1",
        [key],
      );
      if (running.rowCount) {
        const { journalId: _local, turnId: _turn, ...message } = msg;
        await this.opts.notifier.notify(CHANNEL, JSON.stringify(message));
        this.opts.passedOn(msg);
        return;
      }
    } catch (err) {
      this.opts.log.warn({ err: errorMessage(err) }, "cluster: could not pass /stop on; answered here");
    }
    this.opts.stopHere(msg);
  }
}
