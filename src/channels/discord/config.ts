import { z } from "zod";
import { channelBase, groupPolicy, idList } from "../config-common.js";

export const DiscordConfigSchema = z.object({
  ...channelBase,
  token: z.string().default(""),
  replyToMessage: z.boolean().default(false),
  groupPolicy,
  groupAllowFrom: idList,
});

export type DiscordConfig = z.infer<typeof DiscordConfigSchema>;
