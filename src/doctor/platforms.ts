/**
 * Each enabled platform's token asked of its API through its own SDK, at the configured API root
 * (getMe, auth.test, users/@me), so a revoked or mistyped token shows before the gateway starts.
 * The SDKs are imported only for the platforms that are enabled.
 */
import type { Config } from "../config/schema.js";
import { errorMessage } from "../util/errors.js";
import { withTimeout } from "../util/timeout.js";
import { fail, ok, type CheckResult } from "./types.js";

const TIMEOUT_MS = 10_000;

export async function platformChecks(config: Config): Promise<CheckResult[]> {
  const { telegram, slack, discord } = config.channels;
  const checks: Promise<CheckResult>[] = [];
  if (telegram.enabled) checks.push(checkTelegram(telegram.token, telegram.apiRoot));
  if (slack.enabled) checks.push(checkSlack(slack.botToken, slack.apiUrl));
  if (discord.enabled) checks.push(checkDiscord(discord.token, discord.apiUrl));
  return Promise.all(checks);
}

async function checkTelegram(token: string, apiRoot: string): Promise<CheckResult> {
  const name = "telegram token";
  try {
    const { Api } = await import("grammy");
    const me = await withTimeout(new Api(token, { apiRoot }).getMe(), TIMEOUT_MS, "Telegram getMe");
    return ok(name, `bot @${me.username}`);
  } catch (err) {
    return fail(
      name,
      `getMe failed: ${errorMessage(err)}`,
      "check channels.telegram.token (PALAVER_CHANNELS__TELEGRAM__TOKEN): ask @BotFather for the bot's token (/token)",
    );
  }
}

async function checkSlack(token: string, apiUrl: string): Promise<CheckResult> {
  const name = "slack token";
  try {
    const { webApi } = await import("@slack/bolt");
    const client = new webApi.WebClient(token, {
      ...(apiUrl ? { slackApiUrl: apiUrl.endsWith("/") ? apiUrl : `${apiUrl}/` } : {}),
      retryConfig: { retries: 0 },
      timeout: TIMEOUT_MS,
    });
    const auth = await client.auth.test();
    return ok(name, `bot ${auth.user ?? "?"} in ${auth.team ?? "?"}`);
  } catch (err) {
    return fail(
      name,
      `auth.test failed: ${errorMessage(err)}`,
      "check channels.slack.botToken (xoxb-...): the app's OAuth & Permissions page shows it; reinstall the app if it was revoked",
    );
  }
}

async function checkDiscord(token: string, apiUrl: string): Promise<CheckResult> {
  const name = "discord token";
  try {
    const { REST } = await import("discord.js");
    const rest = new REST({
      timeout: TIMEOUT_MS,
      retries: 0,
      ...(apiUrl ? { api: apiUrl.replace(/\/+$/, "") } : {}),
    });
    const me = (await rest.setToken(token).get("/users/@me")) as { username?: string };
    return ok(name, `bot ${me.username ?? "?"}`);
  } catch (err) {
    return fail(
      name,
      `users/@me failed: ${errorMessage(err)}`,
      "check channels.discord.token: Developer Portal → your application → Bot → Reset Token",
    );
  }
}
