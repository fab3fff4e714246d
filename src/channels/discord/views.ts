/**
 * Discord's raw gateway payloads (discord-api-types, as @discordjs/core
 * delivers them) → the small views the pure mapping (mapping.ts) reads. Pure:
 * what the payload does not say (the parent of a thread, a replied-to message
 * Discord did not send along) the adapter looks up and passes in.
 */
import {
  ApplicationCommandType,
  ChannelType,
  ComponentType,
  InteractionType,
  MessageFlags,
  type APIChannel,
  type APIInteraction,
  type APIMessage,
  type APIMessageComponentButtonInteraction,
  type APIChatInputApplicationCommandInteraction,
  type APIUser,
} from "@discordjs/core";
import type {
  DiscordInteractionView,
  DiscordMessageView,
  DiscordPlaceView,
  DiscordUserView,
} from "./mapping.js";
import type { DiscordButtonView } from "./questions.js";

/** What discord.js called non-system: a person's message, a reply, and the two command messages. */
const NON_SYSTEM_TYPES = new Set([0, 19, 20, 23]);

/** A MESSAGE_CREATE payload: the message plus the guild it is in (absent in DMs). */
export type MessagePayload = APIMessage & { guild_id?: string };

function userView(user: APIUser): DiscordUserView {
  return { id: user.id, username: user.username, displayName: user.global_name, bot: user.bot === true };
}

/** `threadParentId`: the parent channel when the message is in a thread (the payload does not say). */
export function messageView(
  message: MessagePayload,
  threadParentId: string | null,
  referenced: APIMessage | null,
): DiscordMessageView {
  return {
    id: message.id,
    type: message.type,
    system: !NON_SYSTEM_TYPES.has(message.type),
    webhookId: message.webhook_id ?? null,
    channelId: message.channel_id,
    guildId: message.guild_id ?? null,
    threadParentId,
    author: userView(message.author),
    content: message.content,
    mentions: message.mentions.map(userView),
    attachments: message.attachments.map((a) => ({
      id: a.id,
      name: a.filename,
      url: a.url,
      size: a.size,
      contentType: a.content_type ?? null,
    })),
    voiceMessage: ((message.flags ?? 0) & MessageFlags.IsVoiceMessage) !== 0,
    referenced: referenced
      ? { id: referenced.id, author: userView(referenced.author), content: referenced.content }
      : null,
  };
}

/**
 * The message a reply refers to when Discord sent it along (`referenced_message`); undefined when
 * it is worth fetching (a reply in the same channel without it), null when there is none to show.
 */
export function sentAlongReference(message: MessagePayload): APIMessage | null | undefined {
  const ref = message.message_reference;
  if (!ref?.message_id) return null;
  if (message.referenced_message) return message.referenced_message;
  return ref.channel_id === undefined || ref.channel_id === message.channel_id ? undefined : null;
}

/** Whether a channel (or the partial one an interaction carries) is a thread, and of which channel. */
export function threadParentOf(
  channel: Pick<APIChannel, "type"> & { parent_id?: string | null },
): string | null {
  return isThread(channel.type) ? (channel.parent_id ?? null) : null;
}

const THREAD_TYPES: ReadonlySet<number> = new Set([
  ChannelType.PublicThread,
  ChannelType.PrivateThread,
  ChannelType.AnnouncementThread,
]);

function isThread(type: number): boolean {
  return THREAD_TYPES.has(type);
}

/** Channel types that never take messages: a category, a directory, forum and media channels (posts only). */
const NOT_SENDABLE: ReadonlySet<number> = new Set([
  ChannelType.GuildCategory,
  ChannelType.GuildDirectory,
  ChannelType.GuildForum,
  ChannelType.GuildMedia,
]);

export function isSendable(type: number): boolean {
  return !NOT_SENDABLE.has(type);
}

function interactionPlace(interaction: APIInteraction): DiscordPlaceView {
  const channel = interaction.channel;
  return {
    channelId: interaction.channel_id ?? channel?.id ?? "",
    guildId: interaction.guild_id ?? null,
    threadParentId: channel ? threadParentOf(channel) : null,
  };
}

/** Who acted: in a server the member's user, in a DM the user. */
function interactionUser(interaction: APIInteraction): APIUser {
  const user = interaction.member?.user ?? interaction.user;
  if (!user) throw new Error(`Discord interaction ${interaction.id} names no user`);
  return user;
}

export function interactionView(
  interaction: APIChatInputApplicationCommandInteraction,
): DiscordInteractionView {
  return {
    id: interaction.id,
    commandName: interaction.data.name,
    args: "",
    ...interactionPlace(interaction),
    user: userView(interactionUser(interaction)),
  };
}

export function buttonView(interaction: APIMessageComponentButtonInteraction): DiscordButtonView {
  return {
    customId: interaction.data.custom_id,
    ...interactionPlace(interaction),
    user: userView(interactionUser(interaction)),
  };
}

export function isButtonPress(
  interaction: APIInteraction,
): interaction is APIMessageComponentButtonInteraction {
  return (
    interaction.type === InteractionType.MessageComponent &&
    interaction.data.component_type === ComponentType.Button
  );
}

export function isSlashCommand(
  interaction: APIInteraction,
): interaction is APIChatInputApplicationCommandInteraction {
  return (
    interaction.type === InteractionType.ApplicationCommand &&
    interaction.data.type === ApplicationCommandType.ChatInput
  );
}
