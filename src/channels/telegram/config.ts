import { z } from "zod";
import { channelBase, groupPolicy, idList } from "../config-common.js";

export const TelegramConfigSchema = z.object({
  ...channelBase,
  token: z.string().default(""),
  proxy: z.string().nullable().default(null),
  replyToMessage: z.boolean().default(false),
  groupPolicy,
  groupAllowFrom: idList,
});

export type TelegramConfig = z.infer<typeof TelegramConfigSchema>;
