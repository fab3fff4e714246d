/**
 * Telegram failures in plain words, and as the ChannelError the outbox acts
 * on: permanent (drop the reply at once) or transient (retry, after
 * retry_after when Telegram gave one).
 */
import { GrammyError, HttpError } from "grammy";
import { ChannelError, errorMessage } from "../../util/errors.js";
import { CHANNEL } from "./mapping.js";

/** A Telegram error in plain words: what happened and what to do. */
export function describeTelegramError(err: unknown, apiRoot: string): string {
  if (err instanceof GrammyError) {
    if (err.error_code === 401) return "the Telegram bot token was rejected (check channels.telegram.token)";
    if (err.error_code === 409) {
      return /webhook/i.test(err.description)
        ? "a webhook is set for this bot token, so polling is refused (palaver removes it at start; is another program setting it?)"
        : "another instance is polling with this token (stop the other palaver/nanobot, or use webhook mode)";
    }
    if (err.error_code === 404 && err.method === "getMe") {
      return `the Bot API at ${apiRoot} does not know this token (check channels.telegram.token and channels.telegram.apiRoot)`;
    }
    return `Telegram refused ${err.method}: ${err.description}`;
  }
  if (err instanceof HttpError) {
    return `cannot reach the Telegram Bot API at ${apiRoot} (${networkReason(err.error)}); check the network and channels.telegram.proxy`;
  }
  return errorMessage(err);
}

/**
 * Why a Bot API call did not get through, without its URL: the URL carries the bot token, and
 * grammy's fetch (node-fetch) says "request to <url> failed, reason: <why>".
 */
function networkReason(err: unknown): string {
  return errorMessage(err)
    .replace(/^request to \S+ failed, reason: /, "")
    .replace(/\/bot[^/\s]+/g, "/bot<token>");
}

/**
 * Error codes after which sending the same message to the same chat can never succeed, so the
 * outbox drops the reply instead of retrying it for minutes (and holding back the chat's next ones):
 * - 403 Forbidden: "bot was blocked by the user", "user is deactivated", "bot was kicked from the
 *   group chat", "bot can't initiate conversation with a user" — only the user or an admin can undo it.
 * - 400 Bad Request: "chat not found", "have no rights to send a message", "not enough rights",
 *   "PEER_ID_INVALID", a message Telegram cannot take. Telegram answers the same request the same way,
 *   every time. (Parse errors, a deleted topic and a migrated group never get here: the send point
 *   retries them in another form first.)
 * Everything else (429, 5xx, the network, a 401 while the token is being rotated) may pass.
 */
const PERMANENT_CODES = new Set([400, 403]);

/** Sending failed: the ChannelError the outbox reads (permanent, retryAfterMs) with the reason in plain words. */
export function sendFailure(err: unknown, method: string, chatId: string, apiRoot: string): ChannelError {
  if (err instanceof ChannelError) return err;
  const grammy = err instanceof GrammyError ? err : undefined;
  const retryAfter = grammy?.parameters.retry_after;
  return new ChannelError(
    `sending to Telegram chat ${chatId} failed: ${describeTelegramError(err, apiRoot)}`,
    {
      cause: err,
      platform: CHANNEL,
      method: grammy?.method ?? method,
      ...(grammy ? { code: grammy.error_code } : {}),
      permanent: grammy !== undefined && PERMANENT_CODES.has(grammy.error_code),
      ...(retryAfter !== undefined ? { retryAfterMs: retryAfter * 1000 } : {}),
    },
  );
}

export function isParseError(err: unknown): boolean {
  return (
    err instanceof GrammyError &&
    err.error_code === 400 &&
    /parse entities|can't find end|unsupported start tag|unexpected end tag/i.test(err.description)
  );
}

export function isThreadGone(err: unknown): boolean {
  return (
    err instanceof GrammyError &&
    err.error_code === 400 &&
    /thread not found|TOPIC_DELETED|TOPIC_CLOSED/i.test(err.description)
  );
}

/** The group became a supergroup: the chat id to send to now. */
export function migratedTo(err: unknown): number | undefined {
  return err instanceof GrammyError ? err.parameters.migrate_to_chat_id : undefined;
}

/** Telegram refused the file as too big to fetch through getFile. */
export function isFileTooBig(err: unknown): boolean {
  return err instanceof GrammyError && /too big/i.test(err.description);
}

/** A 400 for a media upload: photos have size and dimension limits documents do not. */
export function isBadRequest(err: unknown): boolean {
  return err instanceof GrammyError && err.error_code === 400;
}

/** An edit that would change nothing (same text, no buttons already): the message already says it. */
export function isNotModified(err: unknown): boolean {
  return (
    err instanceof GrammyError && err.error_code === 400 && /message is not modified/i.test(err.description)
  );
}

/**
 * sendMessageDraft refused as such, not for this one text: a Bot API older than 9.3 ("method not
 * found"), or a chat where drafts cannot be shown (TEXTDRAFT_PEER_INVALID).
 */
export function isDraftRefused(err: unknown): boolean {
  if (!(err instanceof GrammyError)) return false;
  if (err.error_code === 404) return true;
  return (
    err.error_code === 400 &&
    /TEXTDRAFT|method not found|not (supported|allowed|available)/i.test(err.description)
  );
}
