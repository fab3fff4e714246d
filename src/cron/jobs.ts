/** Pure rules about one cron job: when it is due, how it is listed, what the model reads when it fires. */
import { randomUUID } from "node:crypto";
import { PalaverError } from "../util/errors.js";
import { formatTime } from "./schedule.js";
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
