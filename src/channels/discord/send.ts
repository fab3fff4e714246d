/**
 * The single send point of the Discord channel: every call that posts, edits
 * or signals (a message, an interaction answer, typing) goes through `call`,
 * which turns any failure into a ChannelError (errors.ts) saying whether a
 * retry can help and how long Discord asked us to wait.
 */
import { readFile, stat } from "node:fs/promises";
import { basename } from "node:path";
import { AllowedMentionsTypes, type API, type APIAllowedMentions } from "@discordjs/core";
import type { RawFile } from "@discordjs/rest";
import { ChannelError } from "../../util/errors.js";
import { classifyDiscordError } from "./errors.js";
import { discordChunks, outgoingMessages, type OutgoingMessage } from "./format.js";
import { CHANNEL } from "./mapping.js";
import type { Places } from "./places.js";
import type { ButtonRow } from "./questions.js";
import { isSendable } from "./views.js";

/** The bot never pings @everyone or roles, whatever the model writes. */
export const ALLOWED_MENTIONS: APIAllowedMentions = {
  parse: [AllowedMentionsTypes.User],
  replied_user: true,
};

/** A slash command deferred at once ("thinking…"), waiting for its answer. */
export interface PendingInteraction {
  id: string;
  /** Valid 15 minutes; answers go to the application's webhook with it. */
  token: string;
  applicationId: string;
  commandName: string;
  /** Resolves true once the deferred response is acknowledged, false when deferring failed. */
  deferred: Promise<boolean>;
  answered: boolean;
}

/** The connected client's parts a send needs: null while disconnected. */
export interface SendContext {
  api: API;
  places: Places;
}

export class DiscordSender {
  constructor(private readonly context: () => SendContext | null) {}

  /** Runs one platform call; any failure becomes a ChannelError. */
  async call<T>(method: string, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      throw classifyDiscordError(err, method);
    }
  }

  /**
   * Posts the messages to a channel, DM or thread, the first one optionally as a reply and the last
   * one with `components` (a question's buttons go under its last part). Returns the posted ids.
   */
  async toChannel(
    chatId: string,
    messages: readonly OutgoingMessage[],
    opts: { replyTo?: string; components?: readonly ButtonRow[] } = {},
  ): Promise<string[]> {
    const { api } = await this.sendable(chatId, "createMessage");
    const ids: string[] = [];
    for (const [i, message] of messages.entries()) {
      const last = i === messages.length - 1;
      const id = await this.call("createMessage", async () => {
        const files = await filesOf(message);
        const sent = await api.channels.createMessage(chatId, {
          ...(message.content ? { content: message.content } : {}),
          allowed_mentions: ALLOWED_MENTIONS,
          ...(files.length > 0 ? { files } : {}),
          ...(i === 0 && opts.replyTo
            ? { message_reference: { message_id: opts.replyTo, fail_if_not_exists: false } }
            : {}),
          ...(last && opts.components ? { components: [...opts.components] } : {}),
        });
        return sent.id;
      });
      ids.push(id);
    }
    return ids;
  }

  /** Posts one text message (optionally quoting `replyTo`) and returns its id. */
  async postText(chatId: string, content: string, replyTo?: string): Promise<string> {
    const [id] = await this.toChannel(chatId, [{ content }], { replyTo });
    if (id === undefined) throw new ChannelError("Discord returned no message id", { platform: CHANNEL });
    return id;
  }

  /**
   * Rewrites one of the bot's messages and takes its buttons away (`components: []`). Discord has no
   * "not modified" error: the same text again is a plain success. A message that is gone (10008) or
   * not the bot's (50005) fails permanently (errors.ts).
   */
  async editMessage(chatId: string, messageId: string, content: string | undefined): Promise<void> {
    const { api } = await this.sendable(chatId, "editMessage");
    await this.call("editMessage", () =>
      api.channels.editMessage(chatId, messageId, { ...(content ? { content } : {}), components: [] }),
    );
  }

  /** The API, once the channel is known to take messages (asked from Discord when not known yet). */
  private async sendable(chatId: string, method: string): Promise<SendContext> {
    const context = this.connected();
    const place = await this.call("fetchChannel", () => context.places.get(chatId));
    if (!isSendable(place.type)) {
      // A category or forum never takes messages: retrying cannot help.
      throw new ChannelError(`Discord channel ${chatId} does not take messages`, {
        platform: CHANNEL,
        method,
        permanent: true,
      });
    }
    return context;
  }

  /** Answers a deferred slash command; false when it cannot be used (deferring failed). */
  async toInteraction(pending: PendingInteraction, messages: readonly OutgoingMessage[]): Promise<boolean> {
    if (!(await pending.deferred)) return false;
    const { api } = this.connected();
    for (const message of messages) {
      const files = await filesOf(message);
      const payload = {
        content: message.content ?? "",
        allowed_mentions: ALLOWED_MENTIONS,
        ...(files.length > 0 ? { files } : {}),
      };
      if (pending.answered) {
        await this.call("interactionFollowUp", () =>
          api.interactions.followUp(pending.applicationId, pending.token, payload),
        );
      } else {
        await this.call("editInteractionReply", () =>
          api.interactions.editReply(pending.applicationId, pending.token, payload),
        );
        pending.answered = true;
      }
    }
    return true;
  }

  /** One "typing…" signal; Discord shows it for about 10 s. */
  async typing(chatId: string): Promise<void> {
    const { api, places } = this.connected();
    const place = await this.call("fetchChannel", () => places.get(chatId));
    if (isSendable(place.type)) await this.call("triggerTyping", () => api.channels.showTyping(chatId));
  }

  /** The API while connected. */
  connected(): SendContext {
    const context = this.context();
    if (!context) throw new ChannelError("Discord is not connected", { platform: CHANNEL });
    return context;
  }
}

/** A reply's text and files as Discord messages; files that do not exist are named in the text. */
export async function outgoing(content: string, media: readonly string[]): Promise<OutgoingMessage[]> {
  const { files, missing } = await existingFiles(media);
  const notes = missing.map((f) => `(file not found: ${basename(f)})`);
  const text = [content, ...notes].filter((s) => s.trim() !== "").join("\n\n");
  return outgoingMessages(discordChunks(text), files);
}

/** The message's files, read for upload (they were checked to exist; one gone since fails the send). */
async function filesOf(message: OutgoingMessage): Promise<RawFile[]> {
  return Promise.all(
    (message.files ?? []).map(async (path) => ({ name: basename(path), data: await readFile(path) })),
  );
}

async function existingFiles(paths: readonly string[]): Promise<{ files: string[]; missing: string[] }> {
  const files: string[] = [];
  const missing: string[] = [];
  for (const path of paths) {
    const st = await stat(path).catch(() => null);
    (st?.isFile() ? files : missing).push(path);
  }
  return { files, missing };
}
