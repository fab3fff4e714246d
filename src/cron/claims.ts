/**
 * Runs another instance of the cluster claimed (cron/pg-store.ts `claim`): that instance fires them
 * and records them; this scheduler leaves such a job alone until the record arrives. A claim whose
 * record never comes (its claimer stopped right then) is settled after SETTLE_MS: the schedule
 * moves on without firing the run again. One process (the file store) never sees a claim refused.
 */
import type { Logger } from "../log.js";
import type { CronJobStore } from "./store-types.js";
import type { CronJob } from "./types.js";

/** Twice the scheduler's retry of a failed write (30 s), so a live claimer's retry comes first. */
export const SETTLE_MS = 60_000;

/** What became of a claim: this instance fires the run, another has it, or its claimer is gone. */
export type ClaimOutcome = "mine" | "elsewhere" | "abandoned";

export class RunClaims {
  private readonly elsewhere = new Map<string, { slot: number; seenAt: number }>();

  constructor(
    private readonly store: CronJobStore,
    private readonly log: Logger,
  ) {}

  /** When the job is next looked at: its next run, or once a run claimed elsewhere has settled. */
  dueAt(job: CronJob): number {
    const next = job.state.nextRunAtMs ?? Infinity;
    const seen = this.elsewhere.get(job.id);
    return seen?.slot === next ? seen.seenAt + SETTLE_MS : next;
  }

  /** Claims the job's run `slot` right before it fires. */
  async claim(job: CronJob, slot: number, now: number): Promise<ClaimOutcome> {
    if (await this.store.claim(job.id, slot)) {
      this.elsewhere.delete(job.id);
      return "mine";
    }
    const seen = this.elsewhere.get(job.id);
    if (seen?.slot !== slot) {
      this.elsewhere.set(job.id, { slot, seenAt: now });
      this.log.debug(
        { id: job.id, dueAt: new Date(slot).toISOString() },
        "cron job run claimed by another instance",
      );
      return "elsewhere";
    }
    if (now - seen.seenAt < SETTLE_MS) return "elsewhere";
    this.log.warn(
      { id: job.id, name: job.name, dueAt: new Date(slot).toISOString() },
      "cron job run was claimed by an instance that did not record it (it stopped?); moving its schedule on",
    );
    this.elsewhere.delete(job.id);
    return "abandoned";
  }

  /** Forgets claims of runs the jobs have moved past (the claimer recorded them). */
  prune(jobs: readonly CronJob[]): void {
    for (const [id, { slot }] of this.elsewhere) {
      if (jobs.find((j) => j.id === id)?.state.nextRunAtMs !== slot) this.elsewhere.delete(id);
    }
  }
}
