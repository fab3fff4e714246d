/** One line of the usage ledger: one LLM call, who it was for and what it cost. */
import * as z from "zod";

export const USAGE_KINDS = ["chat", "heartbeat", "cron", "subagent", "consolidation", "delegate"] as const;
export type UsageKind = (typeof USAGE_KINDS)[number];

export const UsageEntrySchema = z.object({
  /** ISO time the call ended. */
  time: z.string(),
  /** The session (conversation) the call worked for; null for work outside any conversation. */
  session: z.string().nullable(),
  agent: z.string(),
  kind: z.enum(USAGE_KINDS),
  model: z.string(),
  provider: z.string(),
  promptTokens: z.number(),
  completionTokens: z.number(),
  /** Of promptTokens, served from the provider's prompt cache. */
  cachedTokens: z.number(),
  /** Of completionTokens, spent on reasoning. */
  reasoningTokens: z.number(),
  /** The provider reported no usage: the counts are palaver's estimate. */
  estimated: z.boolean().optional(),
  /** USD; null when the model has no price in `pricing`. */
  costUsd: z.number().nullable(),
});
export type UsageEntry = z.infer<typeof UsageEntrySchema>;
