import * as z from "zod";
import { channelBase, idList } from "./common.js";

/** Guilds (1) | GuildMessages (512) | DirectMessages (4096) | MessageContent (32768): nanobot's default. */
export const DEFAULT_INTENTS = 37377;
/** nanobot's default gatewayUrl; accepted so a nanobot config loads without warnings. */
export const NANOBOT_GATEWAY_URL = "wss://gateway.discord.gg/?v=10&encoding=json";

export const DiscordConfigSchema = z.object({
  ...channelBase,
  token: z
    .string()
    .default("")
    .describe("The bot token: Developer Portal → your application → Bot → Reset Token."),
  apiUrl: z
    .string()
    .default("")
    .refine((s) => s === "" || /^https?:\/\/\S+$/.test(s), "must be an http(s) URL, or empty")
    .describe(
      "REST API base (@discordjs/rest's api option); empty means https://discord.com/api. The gateway address " +
        "is asked from <apiUrl>/v10/gateway/bot, so this moves both (a proxy, or a test server).",
    ),
  replyToMessage: z.boolean().default(false).describe("Answers quote (reference) the message they answer."),
  groupPolicy: z
    .enum(["mention", "open", "allowlist"])
    .default("mention")
    .describe(
      "In servers: answer when @mentioned or replied to (default), to every message (open), " +
        "or to every message in the groupAllowFrom channels only (allowlist). DMs are always answered.",
    ),
  groupAllowFrom: idList.describe(
    "Channel ids for groupPolicy allowlist; a thread counts as being in its parent channel.",
  ),
  gatewayUrl: z
    .string()
    .default(NANOBOT_GATEWAY_URL)
    .describe("nanobot's key, accepted and not used: the gateway address is asked from apiUrl instead."),
  intents: z
    .number()
    .int()
    .nonnegative()
    .default(DEFAULT_INTENTS)
    .describe(
      "Gateway intents bitfield (nanobot's key). 37377 = servers, server messages, DMs and message " +
        "content. Without 32768 (Message Content, privileged) the bot sees only the text of DMs and " +
        "of messages that mention it.",
    ),
});

export type DiscordConfig = z.infer<typeof DiscordConfigSchema>;

/** Settings of an enabled section that cannot work, in plain words with their config path. */
export function discordProblems(config: DiscordConfig): string[] {
  if (config.token.trim()) return [];
  return [
    "channels.discord.token is empty: create a bot in the Discord Developer Portal (Bot → Reset Token) " +
      "and put its token there",
  ];
}
