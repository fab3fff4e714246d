/** Config pieces every chat platform shares. Each platform's own schema lives in its folder (config.ts). */
import { z } from "zod";

/** Ids may be written as numbers in JSON; they are compared as strings. */
export const idList = z.array(z.union([z.string(), z.number()]).transform(String)).default([]);

export const groupPolicy = z
  .enum(["mention", "open", "allowlist"])
  .default("mention")
  .describe("In groups: answer when mentioned (default), to everything, or only in groupAllowFrom chats.");

export const channelBase = {
  enabled: z.boolean().default(false),
  allowFrom: idList.describe('User ids allowed to talk to the bot. "*" allows everybody; empty, nobody.'),
};
