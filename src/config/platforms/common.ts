/** Config pieces every chat platform shares. Each platform's own section is its file beside this one. */
import * as z from "zod";

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

export const DM_POLICIES = ["pairing", "allowlist", "open", "disabled"] as const;
export type DmPolicy = (typeof DM_POLICIES)[number];

export const channelBase = {
  enabled: z.boolean().default(false),
  allowFrom: idList.describe('User ids allowed to talk to the bot. "*" allows everybody; empty, nobody.'),
  dmPolicy: z
    .enum(DM_POLICIES)
    .default("pairing")
    .describe(
      'Direct messages from people not in allowFrom: "pairing" (default: they get a one-time code for the owner to approve), "allowlist" (refused), "open" (needs allowFrom ["*"]), "disabled" (no direct messages at all). Groups are not affected.',
    ),
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

/**
 * What cannot work in a section's dmPolicy: "open" means everybody, which only allowFrom ["*"]
 * says; anything else would let strangers in behind a list that looks closed.
 */
export function dmPolicyProblems(
  name: string,
  section: { dmPolicy?: DmPolicy; allowFrom: readonly string[] },
): string[] {
  if (section.dmPolicy === "open" && !section.allowFrom.includes("*"))
    return [
      `channels.${name}.dmPolicy: "open" lets everybody in, so it needs channels.${name}.allowFrom to be ["*"]; ` +
        'set allowFrom to ["*"], or choose "pairing" to approve each newcomer',
    ];
  return [];
}

/**
 * Requests a platform's API needs in flight at most, and so connections to it: two per turn or
 * subagent that can run at once (its typing action or receipt beside its reply, draft or preview
 * edit), a long poll and one spare. Unbounded, Telegram's pool had opened 156 connections for 100
 * turns at once; a call beyond the bound waits for one.
 */
export function platformConnections(agents: { maxConcurrentTurns: number; maxSubagents: number }): number {
  return 2 * (agents.maxConcurrentTurns + agents.maxSubagents) + 2;
}
