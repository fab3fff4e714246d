/**
 * Each enabled platform's token asked of its API through its own SDK, at the configured API root
 * (getMe, auth.test, users/@me), so a revoked or mistyped token shows before the gateway starts.
 * A token the API rejects FAILs with where to set a good one; an API that cannot be reached only
 * WARNs (the token may be fine: the network or the API root is what to look at). The SDKs are
 * imported only for the platforms that are enabled.
 */
import type { Config } from "../config/schema.js";
import { logger } from "../log.js";
import { errorMessage } from "../util/errors.js";
import { TimeoutError, withTimeout } from "../util/timeout.js";
import { fail, ok, warn, type CheckResult } from "./types.js";

const TIMEOUT_MS = 10_000;

/** Socket-level failures: nothing answered, so nothing was learnt about the token. */
const NETWORK_CODES =
  /^(ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNRESET|EHOSTUNREACH|ENETUNREACH|UND_ERR_\w+)$/;

/** How a token check ended: the API's answer, or why there was none. */
type TokenOutcome =
  | { kind: "ok"; who: string }
  | { kind: "rejected"; detail: string }
  | { kind: "unreachable"; detail: string }
  | { kind: "failed"; detail: string };

interface TokenCheckWords {
  /** "slack token" */
  name: string;
  /** The config key (and env var) that holds the token, for the fix line. */
  setting: string;
  /** Where a good token comes from. */
  source: string;
  /** The API root the check used, for the unreachable line. */
  apiRoot: string;
  /** The config key of the API root. */
  apiRootSetting: string;
}

/** Pure: the doctor's line for a token check's outcome. */
function tokenCheckResult(outcome: TokenOutcome, words: TokenCheckWords): CheckResult {
  switch (outcome.kind) {
    case "ok":
      return ok(words.name, outcome.who);
    case "rejected":
      return fail(
        words.name,
        outcome.detail,
        `token rejected: set ${words.setting} to a valid token (${words.source})`,
      );
    case "unreachable":
      return warn(
        words.name,
        `${outcome.detail} (${words.apiRoot})`,
        `could not reach the API, so the token was not checked: check this machine's network` +
          ` (or ${words.apiRootSetting}, when it is set)`,
      );
    case "failed":
      return fail(words.name, outcome.detail, `check ${words.setting} (${words.source})`);
  }
}

export async function platformChecks(config: Config): Promise<CheckResult[]> {
  const { telegram, slack, discord } = config.channels;
  const checks: Promise<CheckResult>[] = [];
  if (telegram.enabled) {
    checks.push(
      checkTelegram(telegram.token, telegram.apiRoot).then((outcome) =>
        tokenCheckResult(outcome, {
          name: "telegram token",
          setting: "channels.telegram.token (PALAVER_CHANNELS__TELEGRAM__TOKEN)",
          source: "ask @BotFather for the bot's token: /token",
          apiRoot: telegram.apiRoot,
          apiRootSetting: "channels.telegram.apiRoot",
        }),
      ),
    );
  }
  if (slack.enabled) {
    checks.push(
      checkSlack(slack.botToken, slack.apiUrl).then((outcome) =>
        tokenCheckResult(outcome, {
          name: "slack token",
          setting: "channels.slack.botToken (PALAVER_CHANNELS__SLACK__BOT_TOKEN)",
          source: "xoxb-..., on the app's OAuth & Permissions page; reinstall the app if it was revoked",
          apiRoot: slack.apiUrl || "https://slack.com/api/",
          apiRootSetting: "channels.slack.apiUrl",
        }),
      ),
    );
  }
  if (discord.enabled) {
    checks.push(
      checkDiscord(discord.token, discord.apiUrl).then((outcome) =>
        tokenCheckResult(outcome, {
          name: "discord token",
          setting: "channels.discord.token (PALAVER_CHANNELS__DISCORD__TOKEN)",
          source: "Developer Portal → your application → Bot → Reset Token",
          apiRoot: discord.apiUrl || "https://discord.com/api",
          apiRootSetting: "channels.discord.apiUrl",
        }),
      ),
    );
  }
  return Promise.all(checks);
}

async function checkTelegram(token: string, apiRoot: string): Promise<TokenOutcome> {
  const { Api, GrammyError, HttpError } = await import("grammy");
  try {
    const me = await withTimeout(new Api(token, { apiRoot }).getMe(), TIMEOUT_MS, "Telegram getMe");
    return { kind: "ok", who: `bot @${me.username}` };
  } catch (err) {
    const detail = `getMe failed: ${errorMessage(err)}`;
    // Telegram answers a wrong token with 401 and a token of a deleted bot with 404.
    if (err instanceof GrammyError && (err.error_code === 401 || err.error_code === 404))
      return { kind: "rejected", detail };
    // grammy's HttpError: the request itself failed (no answer from the API).
    if (err instanceof HttpError || err instanceof TimeoutError) return { kind: "unreachable", detail };
    return { kind: "failed", detail };
  }
}

/** auth.test's errors that mean the token itself is no good. */
const SLACK_TOKEN_ERRORS = new Set([
  "invalid_auth",
  "not_authed",
  "token_revoked",
  "token_expired",
  "account_inactive",
  "not_allowed_token_type",
]);

async function checkSlack(token: string, apiUrl: string): Promise<TokenOutcome> {
  const { webApi } = await import("@slack/bolt");
  // Loaded with the SDK, never at startup: it needs Bolt's log levels.
  const { slackLogger } = await import("../channels/slack/logger.js");
  try {
    const client = new webApi.WebClient(token, {
      ...(apiUrl ? { slackApiUrl: apiUrl.endsWith("/") ? apiUrl : `${apiUrl}/` } : {}),
      retryConfig: { retries: 0 },
      timeout: TIMEOUT_MS,
      // The client's own warnings go to palaver's log, not the doctor's output.
      logger: slackLogger(logger("doctor"), [token]),
    });
    const auth = await client.auth.test();
    return { kind: "ok", who: `bot ${auth.user ?? "?"} in ${auth.team ?? "?"}` };
  } catch (err) {
    const detail = `auth.test failed: ${errorMessage(err)}`;
    const code = (err as { code?: unknown }).code;
    const apiError = (err as { data?: { error?: unknown } }).data?.error;
    if (
      code === webApi.ErrorCode.PlatformError &&
      typeof apiError === "string" &&
      SLACK_TOKEN_ERRORS.has(apiError)
    )
      return { kind: "rejected", detail };
    if (code === webApi.ErrorCode.RequestError) return { kind: "unreachable", detail };
    return { kind: "failed", detail };
  }
}

async function checkDiscord(token: string, apiUrl: string): Promise<TokenOutcome> {
  const { REST, DiscordAPIError } = await import("discord.js");
  try {
    const rest = new REST({
      timeout: TIMEOUT_MS,
      retries: 0,
      ...(apiUrl ? { api: apiUrl.replace(/\/+$/, "") } : {}),
    });
    const me = (await rest.setToken(token).get("/users/@me")) as { username?: string };
    return { kind: "ok", who: `bot ${me.username ?? "?"}` };
  } catch (err) {
    const detail = `users/@me failed: ${errorMessage(err)}`;
    if (err instanceof DiscordAPIError && err.status === 401) return { kind: "rejected", detail };
    if (isNetworkFailure(err)) return { kind: "unreachable", detail };
    return { kind: "failed", detail };
  }
}

/** A request that got no answer: a socket error (on the error or its cause) or the request timing out. */
function isNetworkFailure(err: unknown): boolean {
  if (err instanceof Error && err.name === "AbortError") return true;
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && NETWORK_CODES.test(code)) return true;
  }
  return false;
}
