/**
 * The single send point of the Discord channel: every call that posts, edits
 * or signals (a message, an interaction answer, typing) goes through `call`,
 * which turns any failure into a ChannelError (errors.ts) saying whether a
 * retry can help and how long Discord asked us to wait.
 */
import { readFile, stat } from "node:fs/promises";
import { basename } from "node:path";
import {
  MessageFlags,
  type AttachmentPayload,
  type ChatInputCommandInteraction,
  type Client,
  type MessageMentionOptions,
  type SendableChannels,
} from "discord.js";
import { ChannelError } from "../../util/errors.js";
import { classifyDiscordError, interactionGone } from "./errors.js";
import { discordChunks, outgoingMessages, type OutgoingMessage } from "./format.js";
import { CHANNEL } from "./mapping.js";
import type { ButtonRow } from "./questions.js";

/** The bot never pings @everyone or roles, whatever the model writes. */
export const ALLOWED_MENTIONS: MessageMentionOptions = { parse: ["users"], repliedUser: true };

/** A slash command deferred at once ("thinking…"), waiting for its answer. */
export interface PendingInteraction {
  interaction: ChatInputCommandInteraction;
  /** Only its sender sees the answer (a refused sender's notice). */
  ephemeral: boolean;
  /** Resolves true once the deferred response is acknowledged, false when deferring failed. */
  deferred: Promise<boolean>;
  /** An answer was started: the deferred response is (being) edited, further parts are follow-ups. */
  answered: boolean;
  /** Discord refused it as expired (its token dies 15 minutes after the command): answer in the channel. */
  gone?: boolean;
}

export class DiscordSender {
  /**
   * `client`: the gateway connection's client, or (cluster mode, on an instance that does not hold
   * the gateway lease) one that was never logged in, whose REST client has the token: every call
   * here is REST, so both send alike.
   */
  constructor(private readonly client: () => Client | null) {}

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
    const channel = await this.sendable(chatId, "createMessage");
    const ids: string[] = [];
    for (const [i, message] of messages.entries()) {
      const last = i === messages.length - 1;
      const id = await this.call("createMessage", async () => {
        const files = await filesOf(message);
        const sent = await channel.send({
          ...(message.content ? { content: message.content } : {}),
          allowedMentions: ALLOWED_MENTIONS,
          ...(files.length > 0 ? { files } : {}),
          ...(i === 0 && opts.replyTo
            ? { reply: { messageReference: opts.replyTo, failIfNotExists: false } }
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
    const channel = await this.sendable(chatId, "editMessage");
    await this.call("editMessage", () =>
      channel.messages.edit(messageId, { ...(content ? { content } : {}), components: [] }),
    );
  }

  /**
   * The channel, once known to take messages: from discord.js's cache, else asked from Discord.
   * A category or forum never takes messages: retrying cannot help.
   */
  async sendable(chatId: string, method: string): Promise<SendableChannels> {
    const channel = await this.fetchChannel(chatId);
    if (!channel?.isSendable()) {
      throw new ChannelError(`Discord channel ${chatId} does not take messages`, {
        platform: CHANNEL,
        method,
        permanent: true,
      });
    }
    return channel;
  }

  /**
   * Answers a deferred slash command with as many of the messages as it can take, and returns the
   * rest for the channel: all of them when deferring failed, those from the first one Discord
   * refused because the interaction has expired (then `pending.gone`), else none.
   */
  async toInteraction(
    pending: PendingInteraction,
    messages: readonly OutgoingMessage[],
  ): Promise<readonly OutgoingMessage[]> {
    const first = !pending.answered;
    pending.answered = true;
    if (pending.gone) return messages;
    if (!(await pending.deferred)) {
      if (first) pending.answered = false;
      return messages;
    }
    const { interaction, ephemeral } = pending;
    for (const [i, message] of messages.entries()) {
      const files = await filesOf(message);
      const payload = {
        content: message.content ?? "",
        allowedMentions: ALLOWED_MENTIONS,
        ...(files.length > 0 ? { files } : {}),
      };
      try {
        if (first && i === 0) {
          // The deferred response keeps the flags it was deferred with (ephemeral or not).
          await this.call("editInteractionReply", () => interaction.editReply(payload));
        } else {
          await this.call("interactionFollowUp", () =>
            interaction.followUp({ ...payload, ...(ephemeral ? { flags: MessageFlags.Ephemeral } : {}) }),
          );
        }
      } catch (err) {
        if (!interactionGone(err)) throw err;
        pending.gone = true;
        return messages.slice(i);
      }
    }
    return [];
  }

  /** One "typing…" signal; Discord shows it for about 10 s. */
  async typing(chatId: string): Promise<void> {
    const channel = await this.fetchChannel(chatId);
    if (channel?.isSendable()) await this.call("triggerTyping", () => channel.sendTyping());
  }

  /**
   * From discord.js's cache, else asked from Discord. A server channel is taken even when its server
   * is not in the cache (allowUnknownGuild): a client without the gateway connection knows no
   * servers, and sending needs none of what that leaves out.
   */
  private fetchChannel(chatId: string) {
    const client = this.connected();
    return this.call("fetchChannel", () => client.channels.fetch(chatId, { allowUnknownGuild: true }));
  }

  /** The client while connected. */
  private connected(): Client {
    const client = this.client();
    if (!client) throw new ChannelError("Discord is not connected", { platform: CHANNEL });
    return client;
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
async function filesOf(message: OutgoingMessage): Promise<AttachmentPayload[]> {
  return Promise.all(
    (message.files ?? []).map(async (path) => ({ name: basename(path), attachment: await readFile(path) })),
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
