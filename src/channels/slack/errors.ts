/**
 * Slack Web API failures in palaver's terms: a ChannelError that names the
 * method, Slack's error code, whether trying again can ever help, and how long
 * Slack asked us to wait.
 */
import { webApi } from "@slack/bolt";
import { ChannelError, errorMessage } from "../../util/errors.js";
import { CHANNEL_NAME } from "./mapping.js";

/** The bot or app token is not (or no longer) good: nothing works until the config changes. */
export const BAD_TOKEN = new Set([
  "invalid_auth",
  "not_authed",
  "account_inactive",
  "token_revoked",
  "token_expired",
  "not_allowed_token_type",
  "team_disabled",
]);

/**
 * Codes for which the same call can never succeed, so the outbox drops the
 * reply at once instead of retrying it (and holding the chat's later replies).
 */
const PERMANENT = new Set([
  ...BAD_TOKEN,
  // The chat is gone or the bot may not post there; someone has to invite it or unarchive first.
  "channel_not_found",
  "not_in_channel",
  "is_archived",
  "cannot_dm_bot",
  "user_disabled",
  "restricted_action",
  "restricted_action_read_only_channel",
  "restricted_action_thread_only_channel",
  "restricted_action_non_threadable_channel",
  "ekm_access_denied",
  // The app lacks a scope: it must be added and the app reinstalled.
  "missing_scope",
  // The message itself is refused: the same text would be refused again. (Replies are split
  // below Slack's limit, so msg_too_long means Slack's limit is not what we think: still final.)
  "msg_too_long",
  "no_text",
  "invalid_blocks",
  "too_many_attachments",
  "invalid_arguments",
  "invalid_thread_ts",
  // An edit of a message that is gone, not the bot's, or past the workspace's edit window.
  "message_not_found",
  "cant_update_message",
  "edit_window_closed",
]);

/** HTTP statuses that answer the request itself, not a passing condition (429 and 5xx are passing). */
const PERMANENT_HTTP = new Set([400, 401, 403, 404, 410, 413]);

/** Slack's error code (`invalid_auth`, `not_in_channel` ...) of a Web API error, if it is one. */
export function platformError(err: unknown): string | undefined {
  if (typeof err !== "object" || err === null) return undefined;
  const e = err as { code?: unknown; data?: { error?: unknown } };
  return e.code === webApi.ErrorCode.PlatformError && typeof e.data?.error === "string"
    ? e.data.error
    : undefined;
}

/** A Web API call's failure as a ChannelError naming the method and Slack's reason. */
export function slackChannelError(method: string, err: unknown): ChannelError {
  const base = { platform: CHANNEL_NAME, method, cause: err };
  const code = platformError(err);
  if (code) {
    return new ChannelError(`Slack refused ${method}: ${code}${hint(code)}`, {
      ...base,
      code,
      permanent: PERMANENT.has(code),
    });
  }
  const e = err as { code?: unknown; retryAfter?: unknown; statusCode?: unknown };
  if (e.code === webApi.ErrorCode.RateLimitedError && typeof e.retryAfter === "number") {
    return new ChannelError(`Slack rate-limited ${method}: try again in ${e.retryAfter} s`, {
      ...base,
      code: "ratelimited",
      retryAfterMs: e.retryAfter * 1000,
    });
  }
  if (e.code === webApi.ErrorCode.HTTPError && typeof e.statusCode === "number") {
    return new ChannelError(`Slack ${method} failed: HTTP ${e.statusCode}`, {
      ...base,
      code: e.statusCode,
      permanent: PERMANENT_HTTP.has(e.statusCode),
    });
  }
  return new ChannelError(`Slack ${method} failed: ${errorMessage(err)}`, base);
}

function hint(code: string): string {
  switch (code) {
    case "not_in_channel":
    case "channel_not_found":
      return " (invite the bot to the channel: /invite @palaver)";
    case "missing_scope":
      return " (add the scope to the app, see docs/slack.md, and reinstall it)";
    default:
      return "";
  }
}
