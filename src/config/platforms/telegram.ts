import * as z from "zod";
import { channelBase, groupPolicy, idList } from "./common.js";

/** Telegram accepts 1-256 of these characters as a webhook secret token. */
const SECRET_TOKEN = /^[A-Za-z0-9_-]{0,256}$/;

export const TelegramWebhookSchema = z.object({
  url: z
    .string()
    .default("")
    .describe("Public HTTPS URL Telegram posts updates to (it must reach host:port/path, e.g. via a proxy)."),
  secretToken: z
    .string()
    .regex(SECRET_TOKEN, "use 1-256 characters A-Z, a-z, 0-9, _ and -")
    .default("")
    .describe("Checked on every webhook request; empty: a random one is made at each start."),
  host: z.string().default("127.0.0.1").describe("Address the webhook server listens on."),
  port: z.number().int().min(0).max(65535).default(8443),
  path: z.string().startsWith("/").default("/telegram/webhook"),
});

export const TelegramConfigSchema = z.object({
  ...channelBase,
  token: z
    .string()
    .default("")
    .describe("Bot token from @BotFather. Prefer PALAVER_CHANNELS__TELEGRAM__TOKEN in .env."),
  proxy: z
    .string()
    .nullable()
    .default(null)
    .describe("HTTP(S) proxy for Bot API calls, e.g. http://127.0.0.1:7890 (HTTP CONNECT)."),
  replyToMessage: z.boolean().default(false).describe("Replies quote the message they answer."),
  groupPolicy,
  groupAllowFrom: idList.describe('Group chat ids the bot answers in when groupPolicy is "allowlist".'),
  apiRoot: z
    .string()
    .regex(/^https?:\/\/[^\s]+$/, "an http(s) URL such as https://api.telegram.org")
    .default("https://api.telegram.org")
    .describe("Bot API server; change it for a self-hosted telegram-bot-api server."),
  mode: z
    .enum(["polling", "webhook"])
    .default("polling")
    .describe('"polling" (works anywhere) or "webhook" (needs a public HTTPS URL).'),
  webhook: TelegramWebhookSchema.prefault({}),
  dropPendingUpdates: z
    .boolean()
    .default(false)
    .describe("Discard messages that arrived while palaver was not running."),
  pollTimeout: z
    .number()
    .int()
    .min(1)
    .max(50)
    .default(30)
    .describe("Seconds one long-poll request waits for new messages."),
});

export type TelegramConfig = z.infer<typeof TelegramConfigSchema>;

/** Settings of an enabled section that cannot work, in plain words with their config path. */
export function telegramProblems(config: TelegramConfig): string[] {
  const problems: string[] = [];
  if (!config.token.trim()) {
    problems.push(
      "channels.telegram.token is empty: create a bot with @BotFather and set PALAVER_CHANNELS__TELEGRAM__TOKEN " +
        "in .env (or channels.telegram.token in the config)",
    );
  }
  if (config.mode === "webhook" && !config.webhook.url.trim()) {
    problems.push(
      'channels.telegram.webhook.url is empty, but channels.telegram.mode is "webhook": set the public HTTPS URL ' +
        'Telegram should post to, or use mode "polling"',
    );
  }
  return problems;
}
