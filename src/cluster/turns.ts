/**
 * Cluster mode's turn queue: every message the bus carries becomes a row of palaver.inbound and a
 * job of pg-boss's `key_strict_fifo` queue keyed by its session, in one transaction. Each instance
 * works the queue: one turn at a time per conversation across the cluster, conversations in
 * parallel across instances, and a conversation whose turn waits for a retry holds back only
 * itself.
 *
 * - A platform's redelivery, or the same update delivered to two instances, has the same
 *   dedupe key (daemon/journal.ts dedupeKey): the unique index refuses the second row and no job
 *   is made for it.
 * - A job's turn runs in this instance's agent loop under a turn id derived from its row, the
 *   same on every attempt, so the replies a first attempt sent are recognised (cluster/replies.ts).
 * - A job whose instance died stays active until `turnTimeoutSeconds` pass; pg-boss then fails the
 *   attempt and another instance retries it (the tool journal keeps side effects from repeating).
 *   A turn cut off by a graceful stop fails its attempt at once, so another instance takes it now.
 * - Messages reach the queue in the order the bus gave them, per conversation: their inserts are
 *   chained per session key. One that cannot be stored (database down) is retried with backoff;
 *   its local journal entry (the caller's `admitted`) is marked only once it is in.
 */
import type { Job, PgBoss } from "pg-boss";
import type { InboundMessage } from "../bus/types.js";
import { sessionKeyOf } from "../bus/types.js";
import { dedupeKey } from "../daemon/journal.js";
import { InboundSchema } from "../daemon/journal-entries.js";
import { inTransaction, type Database } from "../db/pool.js";
import type { Logger } from "../log.js";
import { backoffDelay, sleep } from "../util/backoff.js";
import { errorMessage } from "../util/errors.js";
import { KeyedQueue } from "../util/keyed-queue.js";

export const TURN_QUEUE = "palaver-turns";

/** What is left of an attempt's time when it stops waiting for its replies: enough to complete the job. */
const REPLY_WAIT_MARGIN_MS = 2000;

interface TurnJob {
  inbound: string;
}

export interface ClusterTurnsOptions {
  url: string;
  db: Database;
  instance: string;
  log: Logger;
  turnTimeoutSeconds: number;
  /** Turns this instance runs at once (agents.defaults.maxConcurrentTurns). */
  concurrency: number;
  /** Runs a job's turn in this instance's loop (AgentLoop.queueTurn); `handled` is called when it ends. */
  runTurn(msg: InboundMessage): void;
  /**
   * Resolves once the replies to `msg`'s chat went out here (the channel manager's queue for that
   * chat), at most withinMs. A job completes only then, so that the conversation's next turn, which
   * may run on another instance at once, cannot answer first, and so that an instance that dies
   * before sending leaves the turn to be run again rather than its reply lost.
   */
  repliesSent?(msg: InboundMessage, withinMs: number): Promise<void>;
  /** Marks the local journal's entry of a message now stored in the queue. */
  admitted?(msg: InboundMessage): void;
  /** Bounds for pg-boss's timers (tests shorten them; defaults suit production). */
  monitorIntervalSeconds?: number;
}

/** What a turn attempt waits on: its end (`handled`) or its cut-off (`abandon`). */
interface Attempt {
  done(): void;
  cutOff(err: Error): void;
}

export class ClusterTurns {
  /** pg-boss, loaded and made by start(): a gateway without a cluster never loads it. */
  private started: PgBoss | undefined;
  private readonly chains = new KeyedQueue();
  private readonly attempts = new Map<string, Attempt>();
  /** Messages on their way into the queue (stored() waits for them), and those by dedupe key. */
  private readonly storing = new Set<Promise<void>>();
  private readonly storingByKey = new Map<string, Promise<void>>();
  private readonly stopping = new AbortController();

  constructor(private readonly opts: ClusterTurnsOptions) {}

  private get boss(): PgBoss {
    if (!this.started) throw new Error("the cluster's turn queue is not started");
    return this.started;
  }

  /** Installs or updates pg-boss's schema and the queue; enqueue() works from now on. */
  async start(): Promise<void> {
    const { PgBoss } = await import("pg-boss");
    const opts = this.opts;
    const boss = new PgBoss({
      connectionString: opts.url,
      application_name: `palaver ${opts.instance}`,
      max: Math.max(4, opts.concurrency + 2),
      useListenNotify: true,
      monitorIntervalSeconds: opts.monitorIntervalSeconds ?? 5,
      superviseIntervalSeconds: opts.monitorIntervalSeconds ?? 5,
    });
    boss.on("error", (err) => opts.log.warn({ err: errorMessage(err) }, "cluster: job queue error"));
    await boss.start();
    this.started = boss;
    const settings = {
      expireInSeconds: this.opts.turnTimeoutSeconds,
      retryLimit: 5,
      retryDelay: 0,
      deleteAfterSeconds: 24 * 3600,
    };
    if (await this.boss.getQueue(TURN_QUEUE)) await this.boss.updateQueue(TURN_QUEUE, settings);
    else await this.boss.createQueue(TURN_QUEUE, { policy: "key_strict_fifo", notify: true, ...settings });
  }

  /** Starts running the queue's turns here (once replies can be routed): one worker per turn slot. */
  async work(): Promise<void> {
    for (let slot = 0; slot < this.opts.concurrency; slot++) {
      let worker = "";
      worker = await this.boss.work<TurnJob>(
        TURN_QUEUE,
        // New jobs wake the workers at once (LISTEN/NOTIFY); the poll is the backstop that finds
        // turns given back by a dead instance's expired attempts.
        { batchSize: 1, pollingIntervalSeconds: 2, notifyPollingIntervalSeconds: 4 },
        async ([job]) => {
          if (job) await this.run(job);
          // Fetch again as soon as this job is settled: the conversation's next turn, unblocked by
          // this completion, may be waiting, and pg-boss wakes workers for new jobs only.
          this.boss.notifyWorker(worker);
        },
      );
    }
  }

  /**
   * Takes a message off the bus into the queue, in its conversation's order. Resolves once it is
   * stored (or known to be a duplicate); retries while the database is unreachable, until stop().
   */
  enqueue(msg: InboundMessage): Promise<void> {
    const storing = this.chains.run(sessionKeyOf(msg), () => this.storeWithRetries(msg));
    const key = dedupeKey(msg);
    this.storing.add(storing);
    if (key !== undefined) this.storingByKey.set(key, storing);
    void storing
      .finally(() => {
        this.storing.delete(storing);
        if (key !== undefined && this.storingByKey.get(key) === storing) this.storingByKey.delete(key);
      })
      .catch(() => undefined);
    return storing;
  }

  /**
   * Resolves once `msg` is stored (at once when it is not on its way: stored already, or not for
   * the queue); without one, once every message enqueued so far is (or this instance stops).
   */
  async stored(msg?: InboundMessage): Promise<void> {
    const key = msg && dedupeKey(msg);
    if (key !== undefined) await this.storingByKey.get(key)?.catch(() => undefined);
    else await Promise.allSettled([...this.storing]);
  }

  private async storeWithRetries(msg: InboundMessage): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        const stored = await this.store(msg);
        if (!stored)
          this.opts.log.info(
            { channel: msg.channel, chatId: msg.chatId, messageId: msg.messageId },
            "duplicate delivery ignored (already in the cluster's queue)",
          );
        this.opts.admitted?.(msg);
        return;
      } catch (err) {
        if (this.stopping.signal.aborted) return; // kept in the local journal for the next start
        const delayMs = backoffDelay(attempt, 500, 30_000);
        this.opts.log.warn(
          { err: errorMessage(err), retryInMs: Math.round(delayMs) },
          "cluster: could not queue a message; will retry",
        );
        await sleep(delayMs, this.stopping.signal).catch(() => undefined);
      }
    }
  }

  /** The loop's onHandled: true when `msg` was a job's turn run here (now ended). */
  handled(msg: InboundMessage): boolean {
    const attempt = msg.journalId === undefined ? undefined : this.attempts.get(msg.journalId);
    attempt?.done();
    return attempt !== undefined;
  }

  /** Conversations pg-boss holds back because their turn failed every retry. */
  blockedKeys(): Promise<string[]> {
    return this.boss.getBlockedKeys(TURN_QUEUE);
  }

  /**
   * Stops taking jobs; turns still running here after the loop's shutdown are given back to the
   * queue (their attempt fails now and another instance retries it). Call after AgentLoop.shutdown.
   */
  async stop(): Promise<void> {
    this.stopping.abort();
    const cut = new Error("cut off by this instance's stop: another instance runs it again");
    for (const attempt of this.attempts.values()) attempt.cutOff(cut);
    await this.started?.stop({ graceful: true, timeout: 10_000 });
  }

  /** Stops taking new jobs (before the loop stops accepting them). */
  async stopWorking(): Promise<void> {
    await this.started?.offWork(TURN_QUEUE, { wait: false });
  }

  /** Inserts the message's row and its job in one transaction; false when it is a duplicate. */
  private async store(msg: InboundMessage): Promise<boolean> {
    const { journalId: _local, turnId: _turn, ...message } = msg;
    return inTransaction(this.opts.db, async (client) => {
      const row = await client.query<{ id: string }>(
        `INSERT INTO palaver.inbound (dedupe_key, session_key, message, received_by)
         VALUES ($1, $2, $3, $4) ON CONFLICT (dedupe_key) DO NOTHING RETURNING id`,
        [dedupeKey(msg) ?? null, sessionKeyOf(msg), JSON.stringify(message), this.opts.instance],
      );
      const id = row.rows[0]?.id;
      if (id === undefined) return false;
      await this.boss.send(TURN_QUEUE, { inbound: id } satisfies TurnJob, {
        singletonKey: sessionKeyOf(msg),
        db: { executeSql: (text: string, values: unknown[]) => client.query(text, values) },
      });
      return true;
    });
  }

  private async run(job: Job<TurnJob>): Promise<void> {
    const id = job.data.inbound;
    const row = await this.opts.db.query<{ message: unknown; state: string }>(
      "UPDATE palaver.inbound SET state = 'running', starts = starts + 1, started_at = now() WHERE id = $1 AND state <> 'done' RETURNING message, state",
      [id],
    );
    if (!row.rows[0]) return; // answered already (an attempt that ended just before its instance died)
    const parsed = InboundSchema.safeParse(row.rows[0].message);
    if (!parsed.success) {
      // Not retried: it would fail the same way every time and block its conversation.
      this.opts.log.error(
        { inbound: id, problem: parsed.error.message },
        "cluster: unreadable queued message skipped",
      );
      await this.markDone(id);
      return;
    }
    const msg: InboundMessage = { ...parsed.data, journalId: id, turnId: `turn-${id}` };
    if (job.retryCount > 0)
      this.opts.log.info({ inbound: id, attempt: job.retryCount + 1 }, "cluster: turn taken over");
    const expires = Date.now() + this.opts.turnTimeoutSeconds * 1000;
    await new Promise<void>((resolve, reject) => {
      this.attempts.set(id, { done: resolve, cutOff: reject });
      this.opts.runTurn(msg);
    }).finally(() => this.attempts.delete(id));
    // Within the attempt's time: past it, pg-boss gives the job to another instance anyway.
    await this.opts.repliesSent?.(msg, Math.max(0, expires - Date.now() - REPLY_WAIT_MARGIN_MS));
    await this.markDone(id);
  }

  private async markDone(id: string): Promise<void> {
    await this.opts.db.query("UPDATE palaver.inbound SET state = 'done', done_at = now() WHERE id = $1", [
      id,
    ]);
  }
}

/**
 * The queue read and changed without working it (`palaver status`, `palaver cluster unblock`);
 * undefined when no gateway has created it yet.
 */
async function withQueue<T>(db: Database, work: (boss: PgBoss) => Promise<T>): Promise<T | undefined> {
  const installed = await db.query<{ t: string | null }>("SELECT to_regclass('pgboss.queue') AS t");
  if (!installed.rows[0]?.t) return undefined;
  const { PgBoss } = await import("pg-boss");
  const boss = new PgBoss({
    db: { executeSql: (text: string, values?: unknown[]) => db.query(text, values) },
    supervise: false,
    schedule: false,
    migrate: false,
  });
  await boss.start();
  try {
    return (await boss.getQueue(TURN_QUEUE)) ? await work(boss) : undefined;
  } finally {
    await boss.stop({ graceful: false, close: false });
  }
}

/** The conversations the queue holds back: their turn failed every retry. */
export async function blockedConversations(db: Database): Promise<string[]> {
  return (await withQueue(db, (boss) => boss.getBlockedKeys(TURN_QUEUE))) ?? [];
}

/**
 * Lets a blocked conversation go on: its failed turn is tried again (`drop`: given up, its message
 * left unanswered). Returns how many failed turns it found.
 */
export async function unblockConversation(db: Database, sessionKey: string, drop: boolean): Promise<number> {
  const found = await withQueue(db, async (boss) => {
    const failed = (await boss.findJobs(TURN_QUEUE, { key: sessionKey })).filter((j) => j.state === "failed");
    const ids = failed.map((j) => j.id);
    if (ids.length) await (drop ? boss.deleteJob(TURN_QUEUE, ids) : boss.retry(TURN_QUEUE, ids));
    return ids.length;
  });
  return found ?? 0;
}
