import * as z from "zod";
import { channelBase, groupPolicy, idList } from "./common.js";

export const DEFAULT_SLACK_PATH = "/slack/events";

/** nanobot's `dm` block. palaver honours `enabled`; who may talk is decided by `allowFrom` for DMs too. */
const SlackDmSchema = z.object({
  enabled: z.boolean().default(true).describe("false: direct messages to the bot are ignored."),
  policy: z
    .enum(["open", "allowlist"])
    .default("open")
    .describe("nanobot compatibility only: palaver checks allowFrom for every message."),
  allowFrom: idList.describe("nanobot compatibility only: put these ids into channels.slack.allowFrom."),
});

export const SlackConfigSchema = z
  .object({
    ...channelBase,
    mode: z
      .enum(["socket", "http"])
      .default("socket")
      .describe(
        '"socket": Socket Mode, no public URL needed (botToken + appToken). "http": Events API (signingSecret, port, path).',
      ),
    botToken: z.string().default("").describe("Bot User OAuth Token (xoxb-...)."),
    appToken: z
      .string()
      .default("")
      .describe("Socket Mode: app-level token (xapp-...) with connections:write."),
    signingSecret: z
      .string()
      .default("")
      .describe("HTTP mode: the app's Signing Secret (Basic Information)."),
    port: z
      .number()
      .int()
      .min(0)
      .max(65535)
      .default(3000)
      .describe("HTTP mode: the port Slack's requests arrive on."),
    path: z.string().optional().describe(`HTTP mode: the request path (default ${DEFAULT_SLACK_PATH}).`),
    apiUrl: z
      .string()
      .default("")
      .describe("Web API base URL; empty for Slack's own (https://slack.com/api/). For tests and proxies."),
    replyInThread: z
      .boolean()
      .default(true)
      .describe(
        "In channels, answer a top-level message in a thread under it (each thread is one conversation).",
      ),
    reactEmoji: z.string().default("eyes").describe('Reaction added when a message is taken; "" for none.'),
    doneEmoji: z
      .string()
      .default("white_check_mark")
      .describe('Reaction that replaces reactEmoji once the reply is sent; "" to just remove it.'),
    groupPolicy,
    groupAllowFrom: idList.describe("Channel ids answered under groupPolicy allowlist."),
    // nanobot compatibility: accepted so a nanobot config loads without warnings.
    webhookPath: z.string().optional().describe("nanobot's name for path."),
    userTokenReadOnly: z
      .boolean()
      .optional()
      .describe("nanobot compatibility only; palaver uses no user token."),
    dm: SlackDmSchema.optional().describe("nanobot's DM settings; palaver honours dm.enabled."),
  })
  .transform((c) => ({
    enabled: c.enabled,
    allowFrom: c.allowFrom,
    dmPolicy: c.dmPolicy,
    admins: c.admins,
    ...(c.streaming !== undefined ? { streaming: c.streaming } : {}),
    ...(c.streamIntervalMs !== undefined ? { streamIntervalMs: c.streamIntervalMs } : {}),
    mode: c.mode,
    botToken: c.botToken,
    appToken: c.appToken,
    signingSecret: c.signingSecret,
    port: c.port,
    path: c.path ?? c.webhookPath ?? DEFAULT_SLACK_PATH,
    apiUrl: c.apiUrl,
    replyInThread: c.replyInThread,
    reactEmoji: c.reactEmoji,
    doneEmoji: c.doneEmoji,
    groupPolicy: c.groupPolicy,
    groupAllowFrom: c.groupAllowFrom,
    ...(c.dm ? { dm: c.dm } : {}),
  }));

export type SlackConfig = z.infer<typeof SlackConfigSchema>;

/** A bot token; with token rotation on, Slack prefixes it with "xoxe.". */
const BOT_TOKEN = /^(xoxe\.)?xoxb-/;

/** Settings of an enabled section that cannot work, in plain words with their config path. */
export function slackProblems(config: SlackConfig): string[] {
  const problems: string[] = [];
  if (!config.botToken.trim()) {
    problems.push("channels.slack.botToken is empty: paste the app's Bot User OAuth Token (xoxb-...)");
  } else if (!BOT_TOKEN.test(config.botToken.trim())) {
    problems.push(
      "channels.slack.botToken must be the Bot User OAuth Token (xoxb-...) from OAuth & Permissions, " +
        "not an app-level or user token",
    );
  }
  if (config.mode === "socket") {
    if (!config.appToken.trim()) {
      problems.push(
        "channels.slack.appToken is empty: Socket Mode needs an app-level token (xapp-...) with connections:write",
      );
    } else if (!config.appToken.trim().startsWith("xapp-")) {
      problems.push("channels.slack.appToken must be an app-level token (xapp-...), not a bot or user token");
    }
  } else if (!config.signingSecret.trim()) {
    problems.push(
      'channels.slack.signingSecret is empty: mode "http" needs the Signing Secret from the app\'s Basic Information',
    );
  }
  return problems;
}
