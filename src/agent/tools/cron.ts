/**
 * The `cron` tool: the model schedules reminders and recurring tasks for the
 * chat it is talking in (nanobot's name and parameters). Jobs are bound to the
 * turn's chat: added jobs deliver there (in the same thread), list shows only
 * this chat's jobs and remove only removes them.
 */
import * as z from "zod";
import { buildSchedule, describeSchedule, formatTime, MIN_EVERY_SECONDS } from "../../cron/schedule.js";
import { CRON_SESSION_PREFIX, type CronService } from "../../cron/service.js";
import type { TargetCheck } from "../../cron/targets.js";
import type { CronJob } from "../../cron/types.js";
import { ToolError } from "../../util/errors.js";
import { defineTool, type Tool } from "./types.js";

/**
 * `checkTarget` says whether the chat's channel can receive the job's replies (cron/targets.ts): the
 * tool refuses a channel the config does not know and passes on its warnings and notes to the model.
 */
export function createCronTool(
  service: CronService,
  checkTarget?: (channel: string, chatId: string) => TargetCheck,
): Tool {
  return defineTool({
    name: "cron",
    description:
      "Schedule reminders and recurring tasks for this chat. Actions: add, list, remove. " +
      `For add give a message and exactly one of every_seconds (repeat; at least ${MIN_EVERY_SECONDS}), cron_expr (5-field cron, ` +
      "optionally with tz such as 'Europe/Paris') or at (ISO date-time for once, e.g. '2026-02-12T10:30:00'; " +
      "without an offset it is read in tz, else the server's local time).",
    parameters: z.object({
      action: z.enum(["add", "list", "remove"]).describe("Action to perform"),
      message: z
        .string()
        .optional()
        .describe("Reminder message, or the instruction to carry out when the job fires (for add)"),
      every_seconds: z
        .number()
        .int()
        .optional()
        .describe(`Interval in seconds, at least ${MIN_EVERY_SECONDS} (for recurring tasks)`),
      cron_expr: z.string().optional().describe("Cron expression like '0 9 * * *' (for scheduled tasks)"),
      tz: z.string().optional().describe("IANA timezone for cron_expr or at (e.g. 'America/Vancouver')"),
      at: z.string().optional().describe("ISO datetime for one-time execution (e.g. '2026-02-12T10:30:00')"),
      job_id: z.string().optional().describe("Job ID (for remove)"),
    }),
    async execute(args, ctx) {
      const chat = { channel: ctx.channel, chatId: ctx.chatId };
      switch (args.action) {
        case "add": {
          // A firing job's turn runs in its own session; jobs scheduling jobs could multiply without end.
          if (ctx.sessionKey.startsWith(CRON_SESSION_PREFIX)) {
            throw new ToolError("cannot schedule new jobs from within a scheduled task");
          }
          const message = args.message?.trim();
          if (!message) throw new ToolError("message is required for add");
          if (!ctx.channel || !ctx.chatId) throw new ToolError("no chat to deliver the job's messages to");
          const target = checkTarget?.(ctx.channel, ctx.chatId) ?? { ok: true };
          if (!target.ok) throw new ToolError(`cannot schedule for this chat: ${target.error}`);
          const { schedule, deleteAfterRun } = buildSchedule(
            {
              everySeconds: args.every_seconds,
              cronExpr: args.cron_expr || undefined,
              tz: args.tz || undefined,
              at: args.at || undefined,
            },
            service.now(),
          );
          const job = await service.add({
            message,
            schedule,
            deleteAfterRun,
            channel: ctx.channel,
            to: ctx.chatId,
            sessionKey: ctx.sessionKey,
            ...(ctx.threadId !== undefined ? { threadId: ctx.threadId } : {}),
            metadata: ctx.metadata,
            // Who asked: the job stops once they are no longer let in (see CronService).
            ...(ctx.sender
              ? {
                  creator: {
                    kind: "sender" as const,
                    channel: ctx.channel,
                    senderId: ctx.sender.id,
                    ...(ctx.sender.aliases.length ? { aliases: ctx.sender.aliases } : {}),
                  },
                }
              : {}),
          });
          const created = `Created job '${job.name}' (id: ${job.id}, ${describeSchedule(job.schedule)}); next run ${nextRunText(job)}`;
          // The note is for the person too: where (and when) the reminder will show.
          return target.note ? `${created}\nTell the user: ${target.note}.` : created;
        }
        case "list": {
          const jobs = await service.list(chat);
          if (jobs.length === 0) return "No scheduled jobs in this chat.";
          return `Scheduled jobs:\n${jobs.map(formatJob).join("\n")}`;
        }
        case "remove": {
          const id = args.job_id?.trim();
          if (!id) throw new ToolError("job_id is required for remove");
          // Another chat's job is "not found": one chat cannot see or cancel another's.
          return (await service.remove(id, chat)) ? `Removed job ${id}` : `Job ${id} not found in this chat`;
        }
      }
    },
  });
}

function nextRunText(job: CronJob): string {
  const next = job.state.nextRunAtMs;
  return next != null ? formatTime(next, job.schedule.tz ?? undefined) : "none";
}

function formatJob(job: CronJob): string {
  const lines = [`- ${job.name} (id: ${job.id}, ${describeSchedule(job.schedule)})`];
  if (!job.enabled) lines.push("  Disabled");
  if (job.state.nextRunAtMs != null) lines.push(`  Next run: ${nextRunText(job)}`);
  if (job.state.lastRunAtMs != null) {
    const error = job.state.lastError ? ` (${job.state.lastError})` : "";
    lines.push(
      `  Last run: ${formatTime(job.state.lastRunAtMs, job.schedule.tz ?? undefined)} — ${job.state.lastStatus ?? "unknown"}${error}`,
    );
  }
  return lines.join("\n");
}
