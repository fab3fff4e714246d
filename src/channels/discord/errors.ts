/**
 * What a failed Discord call means for delivery: every error of a platform
 * call becomes a ChannelError that says whether trying again can succeed
 * (`permanent`) and how long Discord asked us to wait (`retryAfterMs`).
 */
import { DiscordAPIError, HTTPError, RateLimitError } from "discord.js";
import { ChannelError, errorMessage } from "../../util/errors.js";
import { CHANNEL } from "./mapping.js";

/**
 * Discord's JSON error codes after which the same call can never succeed: the outbox drops the
 * message at once instead of retrying it (and holding back the chat's later replies) for minutes.
 */
const PERMANENT_CODES: ReadonlyMap<number, string> = new Map([
  // The bot was removed from the server, or cannot see the channel: nothing we resend changes that.
  [50001, "Missing Access"],
  // The user closed their DMs to the bot, blocked it, or shares no server with it any more.
  [50007, "Cannot send messages to this user"],
  // The channel (or thread) was deleted, or the id never was a channel.
  [10003, "Unknown Channel"],
  // The user's account is gone.
  [10013, "Unknown User"],
  // A server admin took away Send Messages (or Attach Files ...): only a person can give it back.
  [50013, "Missing Permissions"],
  // An edit of a message that was deleted (or never was in that channel): it cannot come back.
  [10008, "Unknown Message"],
  // An edit of a message somebody else wrote: only its author may change it.
  [50005, "Cannot edit a message authored by another user"],
  // An interaction answered too late, or its token dead (see INTERACTION_GONE_CODES).
  [10062, "Unknown interaction"],
  [10015, "Unknown Webhook"],
  [50027, "Invalid Webhook Token"],
]);

/**
 * Codes that say an interaction can no longer be answered through: its callback came after
 * Discord's 3 s (10062), or its token, good for 15 minutes, has died (50027, 10015). What was still
 * to say goes to the channel instead.
 */
const INTERACTION_GONE_CODES: ReadonlySet<number> = new Set([10062, 10015, 50027]);

/** Whether a failed interaction call (classified) means the interaction cannot be answered any more. */
export function interactionGone(err: unknown): boolean {
  return err instanceof ChannelError && INTERACTION_GONE_CODES.has(Number(err.code));
}

/** The ChannelError for a failed Discord call (`method` names it: "createMessage", "triggerTyping"). */
export function classifyDiscordError(err: unknown, method: string): ChannelError {
  if (err instanceof ChannelError) return err;
  const base = { platform: CHANNEL, method, cause: err };
  if (err instanceof RateLimitError) {
    // Thrown by discord.js's REST client instead of queueing the call when the wait is longer than we accept
    // (rejectOnRateLimit): the outbox retries after it, and other chats go on meanwhile.
    return new ChannelError(
      `Discord rate limit on ${err.route}: retry after ${Math.ceil(err.retryAfter / 1000)} s`,
      { ...base, code: 429, retryAfterMs: Math.max(0, Math.ceil(err.retryAfter)) },
    );
  }
  if (err instanceof DiscordAPIError) {
    const code = typeof err.code === "number" ? err.code : Number(err.code);
    const permanent = PERMANENT_CODES.has(code);
    return new ChannelError(
      `Discord ${method} failed: ${err.message} (HTTP ${err.status}, code ${err.code})`,
      {
        ...base,
        code: err.code,
        permanent,
      },
    );
  }
  if (err instanceof HTTPError) {
    // 5xx and the like: Discord's side, worth another try.
    return new ChannelError(`Discord ${method} failed: HTTP ${err.status}`, { ...base, code: err.status });
  }
  // Network errors, timeouts: transient.
  return new ChannelError(`Discord ${method} failed: ${errorMessage(err)}`, base);
}
