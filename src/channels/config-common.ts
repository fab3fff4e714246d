/** Config pieces every chat platform shares. Each platform's own schema lives in its folder (config.ts). */
import { z } from "zod";

/**
 * A user or chat id. Ids are compared as strings; a number is accepted and
 * converted when it is exact. Discord and Slack ids are often above 2^53, and
 * JSON.parse has already rounded such a number to a different id by the time
 * we see it, so an unsafe integer is refused rather than silently matching
 * (or missing) someone else.
 */
const id = z
  .union([z.string(), z.number()])
  .refine((v) => typeof v === "string" || Number.isSafeInteger(v), {
    error: (issue) =>
      `${String(issue.input)} is not an exact id (JSON rounds numbers above 2^53): write ids as strings, in quotes`,
  })
  .transform(String);

/** Ids may be written as numbers in JSON (exact ones only); they are compared as strings. */
export const idList = z.array(id).default([]);

export const groupPolicy = z
  .enum(["mention", "open", "allowlist"])
  .default("mention")
  .describe("In groups: answer when mentioned (default), to everything, or only in groupAllowFrom chats.");

export const channelBase = {
  enabled: z.boolean().default(false),
  allowFrom: idList.describe('User ids allowed to talk to the bot. "*" allows everybody; empty, nobody.'),
  admins: idList.describe(
    "Owners: may answer any approval prompt in any chat here (besides the person who started the turn).",
  ),
  streaming: z
    .boolean()
    .optional()
    .describe("Show replies here while they are written; default: channels.streaming."),
  streamIntervalMs: z
    .number()
    .int()
    .min(250)
    .max(60_000)
    .optional()
    .describe("At most one preview update per this many ms (default: the platform's own pace)."),
};
