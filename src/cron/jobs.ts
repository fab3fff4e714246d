/** Pure rules about one cron job: when it is due, how it is listed, what the model reads when it fires. */
import { randomUUID } from "node:crypto";
import { isSenderAllowed } from "../config/allow-from.js";
import { PalaverError } from "../util/errors.js";
import { formatTime, nextRun } from "./schedule.js";
import { deliveryTarget, type CronJob } from "./types.js";

const MAX_ID_ATTEMPTS = 100;

export interface JobFilter {
  channel?: string;
  chatId?: string;
}

/** What the model reads when a job fires. */
export function jobPrompt(job: CronJob, lateSince?: number): string {
  const late =
    lateSince !== undefined
      ? `\n(This was due at ${formatTime(lateSince, job.schedule.tz ?? undefined)} but palaver was not running then.)`
      : "";
  return (
    `[Scheduled task "${job.name}" (job ${job.id})]${late}\n${job.payload.message}\n\n` +
    "Do this now and reply to the user with the result; for a plain reminder just remind them."
  );
}

export function isDue(job: CronJob, now: number): boolean {
  return job.enabled && job.state.nextRunAtMs != null && job.state.nextRunAtMs <= now;
}

export function needsNextRun(job: CronJob): boolean {
  return job.enabled && job.state.nextRunAtMs == null && job.schedule.kind !== "at";
}

export function matches(job: CronJob, filter: JobFilter): boolean {
  const target = deliveryTarget(job.payload);
  if (filter.channel !== undefined && target?.channel !== filter.channel) return false;
  if (filter.chatId !== undefined && target?.chatId !== filter.chatId) return false;
  return true;
}

export function sortJobs(jobs: CronJob[]): CronJob[] {
  return [...jobs].sort((a, b) => (a.state.nextRunAtMs ?? Infinity) - (b.state.nextRunAtMs ?? Infinity));
}

export function idOf(entry: unknown): string | undefined {
  const id = entry && typeof entry === "object" ? (entry as { id?: unknown }).id : undefined;
  return typeof id === "string" ? id : undefined;
}

/** 8 hex characters, like nanobot's `str(uuid4())[:8]`, unique in the file. */
export function newId(taken: Set<string | undefined>): string {
  for (let i = 0; i < MAX_ID_ATTEMPTS; i++) {
    const id = randomUUID().slice(0, 8);
    if (!taken.has(id)) return id;
  }
  throw new PalaverError("could not find a free cron job id");
}

/** Turns a job off for good (kept in the store, so `cron list` shows it and why). */
export function markDisabled(job: CronJob, now: number, reason: string): void {
  job.enabled = false;
  job.state.nextRunAtMs = null;
  job.state.lastStatus = "skipped";
  job.state.lastError = `disabled: ${reason}`;
  job.updatedAtMs = now;
}

/** A missed run beyond maxCatchUp: recorded as skipped, the schedule moves on. */
export function markMissed(job: CronJob, now: number, dueAt: number): void {
  job.state.lastStatus = "skipped";
  job.state.lastError = `missed at ${formatTime(dueAt, job.schedule.tz ?? undefined)} while palaver was not running`;
  job.updatedAtMs = now;
  if (job.schedule.kind === "at") {
    // Kept (disabled) rather than deleted, so `cron list` shows what was missed.
    job.enabled = false;
    job.state.nextRunAtMs = null;
  } else {
    job.state.nextRunAtMs = nextRun(job.schedule, now);
  }
}

/** After a run: a one-off job is removed from `jobs` (deleteAfterRun) or turned off; others get their next run. */
export function advanceAfterRun(jobs: CronJob[], job: CronJob, now: number): void {
  if (job.schedule.kind === "at") {
    if (job.deleteAfterRun) {
      jobs.splice(jobs.indexOf(job), 1);
    } else {
      job.enabled = false;
      job.state.nextRunAtMs = null;
    }
    return;
  }
  job.state.nextRunAtMs = nextRun(job.schedule, now);
}

/**
 * Why the job's creator may no longer have it run (undefined when it may): a sender taken out of
 * the channel's allowFrom must not keep receiving, or making the agent act on, what they
 * scheduled while they were let in.
 */
export function refusedCreator(
  job: CronJob,
  allowFromOf: ((channel: string) => readonly string[] | undefined) | undefined,
): string | undefined {
  const creator = job.payload.creator;
  if (!allowFromOf || creator?.kind !== "sender") return undefined;
  const allowFrom = allowFromOf(creator.channel) ?? [];
  if (isSenderAllowed(creator.senderId, creator.aliases ?? [], allowFrom)) return undefined;
  return `its creator (${creator.channel} user ${creator.senderId}) is no longer in channels.${creator.channel}.allowFrom (nor approved by pairing)`;
}
