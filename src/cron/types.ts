/**
 * Cron jobs as stored in `<config folder>/cron/jobs.json`, in nanobot's format
 * (nanobot/cron/types.py): `{ "version": 1, "jobs": [CronJob] }`, camelCase
 * keys (snake_case accepted on load), null for "not set". palaver adds
 * `payload.sessionKey`, `payload.threadId` (the origin chat's thread or forum topic, so
 * deliveries stay in it; older versions kept it in `payload.metadata`, still read),
 * `payload.metadata` (what only the origin's channel reads) and `payload.creator` (who made
 * the job; nanobot reads payload fields by name and ignores it). Keys this version does not know
 * are kept, so a file shared with nanobot loses nothing when palaver rewrites it.
 */
import * as z from "zod";
import { legacyReplyPlace } from "../bus/legacy-place.js";
import { checkSchedule } from "./schedule.js";

export const STORE_VERSION = 1;

/** snake_case keys renamed to camelCase (when the camelCase key is not there too). */
function camelKeys(value: unknown): unknown {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    const camel = key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
    if (camel === key || !(camel in value)) out[camel] = v;
  }
  return out;
}

const nullableNumber = z.number().nullish();
const nullableString = z.string().nullish();

export const CronScheduleSchema = z.preprocess(
  camelKeys,
  z
    .object({
      kind: z.enum(["at", "every", "cron"]),
      /** "at": the instant, epoch ms. */
      atMs: nullableNumber,
      /** "every": the interval in ms. */
      everyMs: nullableNumber,
      /** "cron": a 5-field expression. */
      expr: nullableString,
      /** IANA zone the expression (or a naive "at") is read in; null means the host's. */
      tz: nullableString,
    })
    .loose(),
);

/**
 * palaver: who created the job. A chat sender's job stops for good (disabled,
 * with a log line) once that sender is no longer let in on the channel; an
 * operator's (`palaver cron add`) is never checked. Jobs without it (nanobot's,
 * or palaver's before this field) are treated as the operator's: nobody can
 * tell who made them.
 */
export const CronCreatorSchema = z.discriminatedUnion("kind", [
  z
    .object({
      kind: z.literal("sender"),
      channel: z.string().min(1),
      senderId: z.string().min(1),
      /** Other identities of the sender (a Telegram @username) that allowFrom may name instead. */
      aliases: z.array(z.string()).optional(),
    })
    .loose(),
  z.object({ kind: z.literal("operator") }).loose(),
]);

export const CronPayloadSchema = z.preprocess(
  camelKeys,
  z
    .object({
      /** Only "agent_turn" runs in palaver (nanobot's "system_event" jobs are left alone). */
      kind: z.string().default("agent_turn"),
      message: z.string().default(""),
      deliver: z.boolean().default(false),
      /** The chat the turn belongs to and the reply is delivered to. */
      channel: nullableString,
      to: z.union([z.string(), z.number().transform(String)]).nullish(),
      /** palaver: the session the job was created from. */
      sessionKey: nullableString,
      /** palaver: the origin chat's thread or forum topic (ReplyPlace.threadId). */
      threadId: nullableString,
      /** palaver: the origin chat's inbound metadata (older versions: its thread ids too). */
      metadata: z.record(z.string(), z.unknown()).nullish(),
      /** palaver: who created the job (see CronCreatorSchema). */
      creator: CronCreatorSchema.nullish(),
    })
    .loose(),
);

export const CronJobStateSchema = z.preprocess(
  camelKeys,
  z
    .object({
      nextRunAtMs: nullableNumber.default(null),
      lastRunAtMs: nullableNumber.default(null),
      lastStatus: z.enum(["ok", "error", "skipped"]).nullish().default(null),
      lastError: nullableString.default(null),
    })
    .loose(),
);

export const CronJobSchema = z.preprocess(
  camelKeys,
  z
    .object({
      id: z.string().min(1),
      name: z.string().default(""),
      enabled: z.boolean().default(true),
      schedule: CronScheduleSchema,
      payload: CronPayloadSchema.default({ kind: "agent_turn", message: "", deliver: false }),
      state: CronJobStateSchema.default({
        nextRunAtMs: null,
        lastRunAtMs: null,
        lastStatus: null,
        lastError: null,
      }),
      createdAtMs: z.number().default(0),
      updatedAtMs: z.number().default(0),
      deleteAfterRun: z.boolean().default(false),
    })
    .loose()
    .superRefine((job, ctx) => {
      try {
        checkSchedule(job.schedule);
      } catch (err) {
        ctx.addIssue({ code: "custom", path: ["schedule"], message: (err as Error).message });
      }
    }),
);

export type CronSchedule = z.infer<typeof CronScheduleSchema>;
export type CronPayload = z.infer<typeof CronPayloadSchema>;
export type CronCreator = z.infer<typeof CronCreatorSchema>;
export type CronJob = z.infer<typeof CronJobSchema>;

/** The top level of jobs.json; each job is checked on its own so one bad job does not lose the others. */
export const CronStoreFileSchema = z
  .object({
    version: z.number().default(STORE_VERSION),
    jobs: z.array(z.unknown()).default([]),
  })
  .loose();

/** Where a job's reply goes: its payload's channel/to (nanobot's origin fields as a fallback). */
export interface DeliveryTarget {
  channel: string;
  chatId: string;
  sessionKey?: string;
  threadId?: string;
  metadata?: Record<string, unknown>;
}

export function deliveryTarget(payload: CronPayload): DeliveryTarget | null {
  const str = (v: unknown) => (typeof v === "string" && v !== "" ? v : undefined);
  const obj = (v: unknown) =>
    v !== null && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length > 0
      ? (v as Record<string, unknown>)
      : undefined;
  const channel = str(payload.channel) ?? str(payload.originChannel);
  const chatId = str(payload.to) ?? str(payload.originChatId);
  if (!channel || !chatId) return null;
  const sessionKey = str(payload.sessionKey);
  const metadata = obj(payload.metadata) ?? obj(payload.originMetadata) ?? obj(payload.channelMeta);
  const threadId = str(payload.threadId) ?? legacyReplyPlace(metadata).threadId;
  return {
    channel,
    chatId,
    ...(sessionKey ? { sessionKey } : {}),
    ...(threadId ? { threadId } : {}),
    ...(metadata ? { metadata } : {}),
  };
}

/** What /status shows of the schedule (the agent reads it; CronService implements it). */
export interface ScheduleView {
  /** The next jobs that deliver to this chat, soonest first. */
  nextJobsFor(
    channel: string,
    chatId: string,
    limit: number,
  ): Promise<{ id: string; description: string; nextRunAt: Date }[]>;
}
