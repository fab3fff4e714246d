/**
 * A streamed reply on Discord (the PreviewSurface that channels/live-preview.ts drives): the text so
 * far is posted as a message, then that message is edited (PATCH /channels/:id/messages/:id) at most
 * every 1.5 s, past 2000 characters the text continues in a new message, and the final replaces it
 * in place with exactly the chunks a normal final shows (format.ts). Discord renders Markdown
 * leniently, so a half-written text is always a valid message: previews and finals are both plain
 * `content`. A thread is a channel of its own on Discord, so posting to the chat id keeps the reply
 * in its thread.
 *
 * Rate limits: discord.js's REST client waits out short 429s itself, which would hold a stale edit and then send
 * it late. For the preview's messages it is told not to (`isPreviewEdit` in rejectOnRateLimit): the
 * 429 becomes a ChannelError with retryAfterMs at once and the live preview waits, then sends the
 * newest text. With the REST timeout and retries of the adapter's client this bounds every edit.
 */
import type { PreviewSurface } from "../types.js";
import { DISCORD_MAX_CHARS, discordChunks } from "./format.js";

/** Discord allows about 5 edits per 5 s in a channel; one every 1.5 s leaves room for the rest. */
export const DISCORD_PREVIEW_INTERVAL_MS = 1500;

/** The platform calls a preview needs, bound to its chat. */
export interface PreviewCalls {
  /** Posts `text` as a new message (quoting `replyTo` when given) and returns its id. */
  post(text: string, replyTo: string | undefined): Promise<string>;
  edit(messageId: string, text: string): Promise<void>;
  /** Runs once, before the first post: the first visible text ends the turn's "typing…". */
  beforeFirstPost(): Promise<void>;
}

/**
 * The surface of one reply. `replyTo`: the message the reply answers, quoted by the preview's first
 * message only, as a normal final quotes it on its first part only.
 */
export function discordPreviewSurface(calls: PreviewCalls, replyTo: string | undefined): PreviewSurface {
  let posted = false;
  return {
    maxChars: DISCORD_MAX_CHARS,
    intervalMs: DISCORD_PREVIEW_INTERVAL_MS,
    async post(text) {
      if (!posted) await calls.beforeFirstPost();
      const id = await calls.post(text, posted ? undefined : replyTo);
      posted = true;
      return id;
    },
    edit: (messageId, text) => calls.edit(messageId, text),
    finalParts: (content) => discordChunks(content),
  };
}

const MESSAGE_URL = /\/channels\/\d+\/messages\/(\d+)(?:\?.*)?$/;

/**
 * The id of the message a REST call edits (PATCH .../channels/:id/messages/:id), from what discord.js's REST
 * client reports about a rate limit; undefined for any other call.
 */
export function editedMessageId(limit: { method: string; url: string }): string | undefined {
  if (limit.method.toUpperCase() !== "PATCH") return undefined;
  return MESSAGE_URL.exec(limit.url)?.[1];
}
