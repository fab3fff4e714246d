/**
 * The scheduler: one timer for the earliest due job, firing a job by putting a
 * system message on the bus (the agent runs the turn in the job's own session
 * `cron:<id>` and delivers the reply to the chat the job was created from).
 *
 * The job file is the source of truth: `palaver cron` changes it from another
 * process, so the service stats it every `pollIntervalMs` and reloads on any
 * change, and every change it makes is a read-modify-write of the current file
 * (CronStore.update). Jobs missed while palaver was down run once at start (at
 * most `maxCatchUp`, oldest first, with a note that they are late); the rest
 * are skipped and logged.
 *
 * In cluster mode the jobs are the database's (PgCronStore, given as `store`) and every
 * instance runs this scheduler: right before a run fires, the store is asked to claim it, and
 * only the instance that gets it fires and records it; the others leave the job alone until the
 * poll brings the recorded run.
 *
 * Every operation runs on one in-process chain, so timers, polls and tool calls
 * never interleave; `idle()` waits for it (tests, shutdown).
 */
import { mkdir } from "node:fs/promises";
import { dirname } from "node:path";
import { systemMessage, type InboundMessage } from "../bus/types.js";
import { logger, type Logger } from "../log.js";
import type { SessionStorage } from "../sessions/storage.js";
import { PalaverError, errorMessage } from "../util/errors.js";
import { KeyedQueue } from "../util/keyed-queue.js";
import { describeSchedule, nextRun } from "./schedule.js";
import { CronStore } from "./store.js";
import { emptySnapshot, type CronJobStore, type StoreSnapshot } from "./store-types.js";
import { RunClaims } from "./claims.js";
import { announceScheduler, pidPathOf, runningElsewhere, withdrawScheduler } from "./pid-file.js";
import {
  advanceAfterRun,
  idOf,
  isDue,
  jobPrompt,
  markDisabled,
  refusedCreator,
  markMissed,
  matches,
  needsNextRun,
  newId,
  sortJobs,
  type JobFilter,
} from "./jobs.js";
import {
  deliveryTarget,
  type CronCreator,
  type CronJob,
  type CronSchedule,
  type ScheduleView,
} from "./types.js";

/** setTimeout's limit (about 24.8 days); longer waits are re-armed in chunks. */
export const MAX_TIMER_MS = 2 ** 31 - 1;
/** After a failed write, the next attempt waits this long (the job is not published twice meanwhile). */
const RETRY_AFTER_FAILURE_MS = 30_000;
/** A catch-up run this close to its due time is not called late. */
const LATE_GRACE_MS = 60_000;
/** A firing job's turn runs in the session `cron:<id>`. */
export const CRON_SESSION_PREFIX = "cron:";

export interface CronServiceOptions {
  /** The job file: join(stateDir(configPath), "cron", "jobs.json"). Not used when `store` is given. */
  storePath?: string;
  /**
   * Where the jobs live instead of the file: the cluster's database (PgCronStore), shared by every
   * instance's scheduler. No pid file is written then.
   */
  store?: CronJobStore;
  bus: { publishInbound(msg: InboundMessage): void };
  /** Jobs missed while palaver was down that run at start; more are skipped. */
  maxCatchUp: number;
  log?: Logger;
  now?: () => number;
  /** How often the file is checked for changes by another process (default 2 s). */
  pollIntervalMs?: number;
  /** Tests: the longest single timer (default setTimeout's limit). */
  maxTimerMs?: number;
  /**
   * A channel's allowFrom as configured now (it changes on SIGHUP), with the senders approved by
   * pairing (revoked ones leave it at once); undefined
   * when there is no such channel. A job whose creator it no longer lets in is
   * disabled instead of fired. Without it, creators are not checked.
   */
  allowFromOf?: (channel: string) => readonly string[] | undefined;
  /**
   * The jobs this scheduler fires (default all): the gateway leaves the terminal's to `palaver chat`
   * (see targets.ts). Jobs it does not run stay untouched in the file.
   */
  runs?: (job: CronJob) => boolean;
  /** Whether it writes the pid file that tells `palaver cron` a gateway runs the jobs (default true). */
  announce?: boolean;
  /**
   * The agent's session store (files in one process, the database in a cluster): a removed job's
   * session (`cron:<id>`) is deleted with it, so removed jobs leave nothing behind. Without it,
   * sessions are left alone.
   */
  sessions?: Pick<SessionStorage, "remove">;
  /**
   * Why jobs must not run now (the budget is spent: usage/budget.ts), or undefined. A job due
   * meanwhile is recorded as skipped with the reason and keeps its schedule.
   */
  paused?: () => string | undefined;
}

export interface AddJobInput {
  /** Default: the first 30 characters of the message. */
  name?: string;
  message: string;
  schedule: CronSchedule;
  /** Default: true for "at" schedules. */
  deleteAfterRun?: boolean;
  /** The chat the reply is delivered to. */
  channel: string;
  to: string;
  sessionKey?: string;
  /** The origin chat's thread or forum topic, so the reply stays in it. */
  threadId?: string;
  /** The origin chat's metadata (what only its channel reads). */
  metadata?: Record<string, unknown>;
  /** Who asked for the job: a chat sender (checked against allowFrom when it fires) or the operator. */
  creator?: CronCreator;
}

export interface RunOptions {
  /** Record the run (last run, status) but leave the schedule as it is: `palaver cron run` outside the gateway. */
  keepSchedule?: boolean;
}

export class CronService implements ScheduleView {
  readonly store: CronJobStore;
  /** The job file, when the jobs are in one. */
  readonly storePath: string | undefined;
  private readonly bus: CronServiceOptions["bus"];
  private readonly maxCatchUp: number;
  private readonly log: Logger;
  /** The service's clock (injected in tests). */
  readonly now: () => number;
  private readonly pollIntervalMs: number;
  private readonly maxTimerMs: number;
  private readonly allowFromOf: CronServiceOptions["allowFromOf"];
  private readonly runs: (job: CronJob) => boolean;
  private readonly announce: boolean;
  private readonly sessions: Pick<SessionStorage, "remove"> | undefined;
  private readonly paused: () => string | undefined;

  /** The jobs as last read, for the timer. */
  private jobs: CronJob[] = [];
  private signature: string | null = null;
  private started = false;
  private timer: NodeJS.Timeout | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private retryAt = 0;
  /** The one in-process chain every operation runs on. */
  private readonly chain = new KeyedQueue();
  /** Occurrences already published (job id → the nextRunAtMs fired), so a failed write never publishes twice. */
  private readonly published = new Map<string, number>();
  /** Runs another instance claimed (job id → that run and when we saw it), not fired here. */
  private readonly claims: RunClaims;

  constructor(opts: CronServiceOptions) {
    this.log = opts.log ?? logger("cron");
    if (opts.store) {
      this.store = opts.store;
      this.storePath = undefined;
    } else if (opts.storePath !== undefined) {
      this.store = new CronStore(opts.storePath, { log: this.log });
      this.storePath = opts.storePath;
    } else {
      throw new PalaverError("CronService needs a storePath (the jobs file) or a store");
    }
    this.bus = opts.bus;
    this.maxCatchUp = Math.max(0, opts.maxCatchUp);
    this.now = opts.now ?? (() => Date.now());
    this.pollIntervalMs = Math.max(10, opts.pollIntervalMs ?? 2000);
    this.maxTimerMs = Math.min(MAX_TIMER_MS, Math.max(1, opts.maxTimerMs ?? MAX_TIMER_MS));
    this.allowFromOf = opts.allowFromOf;
    this.runs = opts.runs ?? (() => true);
    this.announce = this.storePath !== undefined && (opts.announce ?? true);
    this.sessions = opts.sessions;
    this.paused = opts.paused ?? (() => undefined);
    this.claims = new RunClaims(this.store, this.log);
  }

  /** The file that tells `palaver cron` a gateway is running this store. */
  static pidPath = pidPathOf;

  /** Whether a live process (other than this one) runs a started service on this store. */
  static runningElsewhere = runningElsewhere;

  /** Loads the jobs, runs the missed ones, arms the timer and starts watching the file. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    if (this.storePath !== undefined) await mkdir(dirname(this.storePath), { recursive: true, mode: 0o700 });
    if (this.announce && this.storePath !== undefined) await announceScheduler(this.storePath, this.log);
    await this.enqueue(() => this.catchUp());
    this.schedulePoll();
  }

  /** Stops the timers and waits for a running operation to finish. */
  async stop(): Promise<void> {
    if (!this.started) return;
    this.started = false;
    clearTimeout(this.timer);
    clearTimeout(this.pollTimer);
    this.timer = this.pollTimer = undefined;
    await this.idle();
    if (this.announce && this.storePath !== undefined) await withdrawScheduler(this.storePath);
  }

  /** Resolves when no operation (firing, reload, change) is running or queued. */
  async idle(): Promise<void> {
    await this.chain.idle();
  }

  async add(input: AddJobInput): Promise<CronJob> {
    return this.enqueue(async () => {
      const now = this.now();
      const nextRunAtMs = nextRun(input.schedule, now);
      if (nextRunAtMs === null) throw new PalaverError("this schedule never runs (is the time in the past?)");
      const { result: job, ...written } = await this.store.update((snap) => {
        const job: CronJob = {
          id: newId(new Set([...snap.jobs.map((j) => j.id), ...snap.invalid.map(idOf)])),
          name: input.name?.trim() || input.message.slice(0, 30),
          enabled: true,
          schedule: input.schedule,
          payload: {
            kind: "agent_turn",
            message: input.message,
            deliver: true,
            channel: input.channel,
            to: input.to,
            ...(input.sessionKey ? { sessionKey: input.sessionKey } : {}),
            ...(input.threadId ? { threadId: input.threadId } : {}),
            ...(input.metadata && Object.keys(input.metadata).length ? { metadata: input.metadata } : {}),
            ...(input.creator ? { creator: input.creator } : {}),
          },
          state: { nextRunAtMs, lastRunAtMs: null, lastStatus: null, lastError: null },
          createdAtMs: now,
          updatedAtMs: now,
          deleteAfterRun: input.deleteAfterRun ?? input.schedule.kind === "at",
        };
        snap.jobs.push(job);
        return job;
      });
      this.adopt(written);
      this.log.info(
        { id: job.id, name: job.name, schedule: describeSchedule(job.schedule) },
        "cron job added",
      );
      return job;
    });
  }

  /** The jobs (optionally of one chat), soonest first; read from the file as it is now. */
  async list(filter: JobFilter = {}): Promise<CronJob[]> {
    const snapshot = await this.store.read();
    return sortJobs(snapshot.jobs.filter((j) => matches(j, filter)));
  }

  async get(id: string): Promise<CronJob | undefined> {
    return (await this.store.read()).jobs.find((j) => j.id === id);
  }

  /** Removes a job (only when it belongs to the chat in `filter`, if given); false when there is none. */
  async remove(id: string, filter: JobFilter = {}): Promise<boolean> {
    return this.enqueue(async () => {
      const { result, ...written } = await this.store.update((snap) => {
        const index = snap.jobs.findIndex((j) => j.id === id && matches(j, filter));
        if (index < 0) return false;
        snap.jobs.splice(index, 1);
        return true;
      });
      this.adopt(written);
      if (result) {
        this.log.info({ id }, "cron job removed");
        await this.removeSession(id);
      }
      return result;
    });
  }

  /**
   * A job's turn ended (the agent loop says so for every message). When the job is gone by now (a
   * one-shot job removes itself as it fires; a job removed while its turn ran), the session the
   * turn has just written goes too, so removed jobs leave nothing behind.
   */
  turnEnded(msg: InboundMessage): void {
    const id = msg.metadata?.cronJobId;
    if (typeof id !== "string" || this.sessions === undefined) return;
    void this.enqueue(async () => {
      if (!(await this.store.read()).jobs.some((j) => j.id === id)) await this.removeSession(id);
    }).catch((err: unknown) => this.log.warn({ err, id }, "could not tidy up a removed cron job's session"));
  }

  /** The removed job's session goes with it; failing to delete it does not undo the removal. */
  private async removeSession(id: string): Promise<void> {
    if (this.sessions === undefined) return;
    const session = CRON_SESSION_PREFIX + id;
    try {
      await this.sessions.remove(session);
    } catch (err) {
      this.log.warn({ err, id, session }, "cron job removed, but its session could not be deleted");
    }
  }

  /** Fires a job now, in this process. */
  async run(id: string, opts: RunOptions = {}): Promise<CronJob> {
    return this.enqueue(async () => {
      const now = this.now();
      const { result, ...written } = await this.store.update(async (snap) => {
        const job = snap.jobs.find((j) => j.id === id);
        if (!job) return undefined;
        const copy = structuredClone(job);
        await this.fire(snap, job, now, { explicit: true, keepSchedule: opts.keepSchedule });
        return copy;
      });
      this.adopt(written);
      if (!result) throw new PalaverError(`no cron job with id ${id}`);
      return result;
    });
  }

  /**
   * Asks the service running in another process (the gateway) to fire a job:
   * marks it due now in the file, which that service picks up on its next poll.
   */
  async requestRun(id: string): Promise<CronJob> {
    const now = this.now();
    const { result } = await this.store.update((snap) => {
      const job = snap.jobs.find((j) => j.id === id);
      if (!job) return undefined;
      job.enabled = true;
      job.state.nextRunAtMs = now;
      job.updatedAtMs = now;
      return structuredClone(job);
    });
    if (!result) throw new PalaverError(`no cron job with id ${id}`);
    return result;
  }

  /** Reads the file, so it also answers in `palaver chat`, where the service is not started. */
  async nextJobsFor(
    channel: string,
    chatId: string,
    limit: number,
  ): Promise<{ id: string; description: string; nextRunAt: Date }[]> {
    const jobs = await this.list({ channel, chatId });
    return jobs
      .filter((j) => j.enabled)
      .filter((j) => j.state.nextRunAtMs != null)
      .slice(0, Math.max(0, limit))
      .map((j) => ({ id: j.id, description: j.name, nextRunAt: new Date(j.state.nextRunAtMs!) }));
  }

  // ── internals ──────────────────────────────────────────────

  /** Runs `fn` after everything queued before it; its failure is the caller's, not the chain's. */
  private enqueue<T>(fn: () => Promise<T>): Promise<T> {
    return this.chain.run("jobs", fn);
  }

  /**
   * Takes a snapshot as the service's view of the file and re-arms the timer.
   * `signature` is the file's as it was when the snapshot was read (or written).
   */
  private adopt({ snapshot, signature }: { snapshot: StoreSnapshot; signature: string | null }): void {
    this.jobs = snapshot.jobs;
    this.signature = signature;
    for (const [id, at] of this.published) {
      if (this.jobs.find((j) => j.id === id)?.state.nextRunAtMs !== at) this.published.delete(id);
    }
    this.claims.prune(this.jobs);
    this.arm();
  }

  private async catchUp(): Promise<void> {
    const now = this.now();
    try {
      await this.catchUpAt(now);
    } catch (err) {
      // The gateway runs without cron rather than not at all; the timer tries again.
      this.log.error(
        { err },
        `cron: loading the jobs failed; trying again in ${RETRY_AFTER_FAILURE_MS / 1000} s`,
      );
      this.retryAt = now + RETRY_AFTER_FAILURE_MS;
      // The next poll reloads, whatever the file's signature.
      this.adopt({ snapshot: await this.store.read().catch(() => emptySnapshot()), signature: "unknown" });
    }
  }

  private async catchUpAt(now: number): Promise<void> {
    const written = await this.store.update(async (snap) => {
      this.fillNextRuns(snap, now);
      const due = sortJobs(snap.jobs.filter((j) => this.firesNow(j, now)));
      for (const [i, job] of due.entries()) {
        const dueAt = job.state.nextRunAtMs!;
        if (i < this.maxCatchUp) {
          const late = now - dueAt > LATE_GRACE_MS ? dueAt : undefined;
          await this.fire(snap, job, now, { lateSince: late });
        } else {
          this.skipMissed(job, now, dueAt);
        }
      }
    });
    this.adopt(written);
  }

  /** Fires whatever is due now. */
  private async fireDue(): Promise<void> {
    if (!this.started) return;
    const now = this.now();
    try {
      const written = await this.store.update(async (snap) => {
        this.fillNextRuns(snap, now);
        const due = snap.jobs.filter((j) => this.firesNow(j, now));
        for (const job of sortJobs(due)) await this.fire(snap, job, now);
      });
      this.retryAt = 0;
      this.adopt(written);
    } catch (err) {
      this.log.error(
        { err },
        `cron: updating the jobs file failed; trying again in ${RETRY_AFTER_FAILURE_MS / 1000} s`,
      );
      this.retryAt = this.now() + RETRY_AFTER_FAILURE_MS;
      this.arm();
    }
  }

  /** Reloads when the file changed under us (`palaver cron` in another process, a hand edit). */
  private async checkForChanges(): Promise<void> {
    if (!this.started) return;
    try {
      const signature = await this.store.signature();
      if (signature === this.signature) return;
      // Read after the stat: a change in between is seen again by the next poll, never missed.
      const snapshot = await this.store.read();
      this.log.debug({ jobs: snapshot.jobs.length }, "cron jobs file changed; reloaded");
      this.adopt({ snapshot, signature });
      // A job written without a next run (by hand, or by nanobot) gets one.
      if (snapshot.jobs.some((j) => needsNextRun(j))) await this.fireDue();
    } catch (err) {
      this.log.warn({ err }, "cron: checking the jobs file for changes failed");
    }
  }

  private schedulePoll(): void {
    if (!this.started) return;
    this.pollTimer = setTimeout(() => {
      this.pollTimer = undefined;
      void this.enqueue(() => this.checkForChanges()).finally(() => this.schedulePoll());
    }, this.pollIntervalMs);
  }

  /** One timer, for the earliest due job; waits longer than setTimeout allows are chunked. */
  private arm(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.started) return;
    let next = Infinity;
    for (const job of this.jobs) {
      if (job.enabled && job.state.nextRunAtMs != null && this.runs(job))
        next = Math.min(next, this.claims.dueAt(job));
    }
    if (next === Infinity) return;
    next = Math.max(next, this.retryAt);
    const delay = Math.min(Math.max(0, next - this.now()), this.maxTimerMs);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      // Only the end of the last chunk does any work; earlier ones just wait again.
      if (this.now() >= next) void this.enqueue(() => this.fireDue());
      else this.arm();
    }, delay);
  }

  /** Whether this scheduler fires the job at `now`. */
  private firesNow(job: CronJob, now: number): boolean {
    return this.runs(job) && isDue(job, now) && this.claims.dueAt(job) <= now;
  }

  /** Jobs enabled but without a next run (written by hand or by nanobot) get one. */
  private fillNextRuns(snap: StoreSnapshot, now: number): void {
    for (const job of snap.jobs) {
      if (!needsNextRun(job)) continue;
      job.state.nextRunAtMs = nextRun(job.schedule, now);
      if (job.state.nextRunAtMs === null) {
        this.log.warn(
          { id: job.id, schedule: describeSchedule(job.schedule) },
          "cron job never runs; left as it is",
        );
      }
    }
  }

  /**
   * Publishes the job's turn and records the run in `job` (removing it from `snap` if it was
   * one-shot); leaves the job alone when another instance claimed this run.
   */
  private async fire(
    snap: StoreSnapshot,
    job: CronJob,
    now: number,
    opts: { lateSince?: number; keepSchedule?: boolean; explicit?: boolean } = {},
  ): Promise<void> {
    const refused = refusedCreator(job, this.allowFromOf);
    if (refused) {
      this.disable(job, now, refused);
      return;
    }
    const occurrence = job.state.nextRunAtMs ?? now;
    const alreadyPublished = !opts.explicit && this.published.get(job.id) === occurrence;
    const target = deliveryTarget(job.payload);
    let status: "ok" | "error" | "skipped" = "ok";
    let error: string | null = null;
    const paused = alreadyPublished ? undefined : this.paused();
    if (job.payload.kind !== "agent_turn") {
      status = "skipped";
      error = `payload kind "${job.payload.kind}" is not run by palaver`;
    } else if (!target) {
      status = "skipped";
      error = "no chat to deliver to (payload.channel / payload.to are missing)";
    } else if (paused) {
      status = "skipped";
      error = paused;
    } else if (!alreadyPublished) {
      // An explicit run (`palaver cron run` here) is not one of the schedule's runs.
      if (!opts.explicit) {
        const claim = await this.claims.claim(job, occurrence, now);
        if (claim === "abandoned") {
          job.updatedAtMs = now;
          advanceAfterRun(snap.jobs, job, now);
        }
        if (claim !== "mine") return;
      }
      try {
        this.bus.publishInbound(
          systemMessage({
            senderId: "cron",
            content: jobPrompt(job, opts.lateSince),
            origin: {
              channel: target.channel,
              chatId: target.chatId,
              ...(target.sessionKey ? { sessionKey: target.sessionKey } : {}),
              ...(target.threadId ? { threadId: target.threadId } : {}),
              ...(target.metadata ? { metadata: target.metadata } : {}),
            },
            sessionKey: CRON_SESSION_PREFIX + job.id,
            metadata: { cronJobId: job.id },
          }),
        );
        if (!opts.explicit) this.published.set(job.id, occurrence);
      } catch (err) {
        status = "error";
        error = errorMessage(err);
      }
    }
    if (status === "ok") {
      this.log.info({ id: job.id, name: job.name, late: opts.lateSince !== undefined }, "cron job fired");
    } else {
      this.log.warn({ id: job.id, name: job.name, problem: error }, "cron job not run");
    }
    job.state.lastRunAtMs = now;
    job.state.lastStatus = status;
    job.state.lastError = error;
    job.updatedAtMs = now;
    if (opts.keepSchedule) return;
    advanceAfterRun(snap.jobs, job, now);
  }

  /** Turns a job off for good (kept in the file, so `cron list` shows it and why). */
  private disable(job: CronJob, now: number, reason: string): void {
    this.log.warn(
      { id: job.id, name: job.name, creator: job.payload.creator },
      `cron job disabled: ${reason}; it will not run again (palaver cron list shows it)`,
    );
    markDisabled(job, now, reason);
    this.published.delete(job.id);
  }

  /** A missed run beyond maxCatchUp: recorded as skipped, the schedule moves on. */
  private skipMissed(job: CronJob, now: number, dueAt: number): void {
    this.log.warn(
      { id: job.id, name: job.name, dueAt: new Date(dueAt).toISOString(), maxCatchUp: this.maxCatchUp },
      "cron job missed while palaver was not running; skipped (more missed jobs than cron.maxCatchUp)",
    );
    markMissed(job, now, dueAt);
  }
}
