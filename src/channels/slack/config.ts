import { z } from "zod";
import { channelBase, groupPolicy, idList } from "../config-common.js";

export const SlackConfigSchema = z.object({
  ...channelBase,
  mode: z.enum(["socket", "http"]).default("socket"),
  botToken: z.string().default(""),
  appToken: z.string().default(""),
  signingSecret: z.string().default(""),
  replyInThread: z.boolean().default(true),
  reactEmoji: z.string().default("eyes"),
  groupPolicy,
  groupAllowFrom: idList,
});

export type SlackConfig = z.infer<typeof SlackConfigSchema>;
