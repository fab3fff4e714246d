/**
 * discord.js's structures (Message, ChatInputCommandInteraction, ButtonInteraction) → the small
 * views the pure mapping (mapping.ts) reads. Pure: each function reads only the fields named in
 * its parameter's type (which a discord.js object has), and what the object does not say (the
 * message a reply refers to, when it had to be fetched) the adapter passes in.
 */
import { ChannelType, MessageFlags } from "discord.js";
import type {
  DiscordInteractionView,
  DiscordMessageView,
  DiscordPlaceView,
  DiscordUserView,
} from "./mapping.js";
import type { DiscordButtonView } from "./questions.js";

/** The parts of a discord.js User the views read. */
export interface UserLike {
  id: string;
  username: string;
  globalName: string | null;
  bot: boolean;
}

/** The parts of a discord.js Channel the views read (a thread knows its parent). */
export interface ChannelLike {
  type: ChannelType;
  parentId?: string | null;
}

/** The parts of a discord.js Message the views read. */
export interface MessageLike {
  id: string;
  type: number;
  system: boolean;
  webhookId: string | null;
  channelId: string;
  guildId: string | null;
  author: UserLike;
  content: string;
  mentions: { users: { values(): Iterable<UserLike> } };
  attachments: {
    values(): Iterable<{ id: string; name: string; url: string; size: number; contentType: string | null }>;
  };
  flags: { has(bit: MessageFlags): boolean };
}

/** The parts of a discord.js interaction the views read. */
export interface InteractionLike {
  id: string;
  channelId: string | null;
  guildId: string | null;
  channel: ChannelLike | null;
  user: UserLike;
}

function userView(user: UserLike): DiscordUserView {
  return { id: user.id, username: user.username, displayName: user.globalName, bot: user.bot };
}

/** `channel`: where the message was posted, when known (a thread names its parent). */
export function messageView(
  message: MessageLike,
  channel: ChannelLike | null,
  referenced: Pick<MessageLike, "id" | "author" | "content"> | null,
): DiscordMessageView {
  return {
    id: message.id,
    type: message.type,
    system: message.system,
    webhookId: message.webhookId,
    channelId: message.channelId,
    guildId: message.guildId,
    threadParentId: channel ? threadParentOf(channel) : null,
    author: userView(message.author),
    content: message.content,
    mentions: [...message.mentions.users.values()].map(userView),
    attachments: [...message.attachments.values()].map((a) => ({
      id: a.id,
      name: a.name,
      url: a.url,
      size: a.size,
      contentType: a.contentType,
    })),
    voiceMessage: message.flags.has(MessageFlags.IsVoiceMessage),
    referenced: referenced
      ? { id: referenced.id, author: userView(referenced.author), content: referenced.content }
      : null,
  };
}

/** Whether a channel is a thread, and of which channel. */
export function threadParentOf(channel: ChannelLike): string | null {
  return THREAD_TYPES.has(channel.type) ? (channel.parentId ?? null) : null;
}

const THREAD_TYPES: ReadonlySet<ChannelType> = new Set([
  ChannelType.PublicThread,
  ChannelType.PrivateThread,
  ChannelType.AnnouncementThread,
]);

function interactionPlace(interaction: InteractionLike): DiscordPlaceView {
  return {
    channelId: interaction.channelId ?? "",
    guildId: interaction.guildId,
    threadParentId: interaction.channel ? threadParentOf(interaction.channel) : null,
  };
}

export function interactionView(
  interaction: InteractionLike & { commandName: string },
): DiscordInteractionView {
  return {
    id: interaction.id,
    commandName: interaction.commandName,
    args: "",
    ...interactionPlace(interaction),
    user: userView(interaction.user),
  };
}

export function buttonView(interaction: InteractionLike & { customId: string }): DiscordButtonView {
  return {
    customId: interaction.customId,
    ...interactionPlace(interaction),
    user: userView(interaction.user),
  };
}
