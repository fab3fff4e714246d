/**
 * discord.js objects → the small views the pure mapping (mapping.ts) reads.
 * The only network here is fetching the message a reply refers to, when
 * Discord did not send it along.
 */
import {
  MessageFlags,
  type ButtonInteraction,
  type ChatInputCommandInteraction,
  type Message,
  type User,
} from "discord.js";
import { withTimeout } from "../../util/timeout.js";
import type { DiscordInteractionView, DiscordMessageView, DiscordUserView } from "./mapping.js";
import type { DiscordButtonView } from "./questions.js";

const REFERENCE_FETCH_TIMEOUT_MS = 5000;

function userView(user: User): DiscordUserView {
  return { id: user.id, username: user.username, displayName: user.globalName, bot: user.bot };
}

export async function messageView(message: Message): Promise<DiscordMessageView> {
  const channel = message.channel;
  return {
    id: message.id,
    type: message.type,
    system: message.system,
    webhookId: message.webhookId ?? null,
    channelId: message.channelId,
    guildId: message.guildId ?? null,
    threadParentId: channel?.isThread() ? channel.parentId : null,
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
    referenced: await referencedView(message),
  };
}

/** Discord sends the message replied to along with the reply; fetch it only when it did not. */
async function referencedView(message: Message): Promise<DiscordMessageView["referenced"]> {
  const id = message.reference?.messageId;
  if (!id) return null;
  let ref = message.channel?.messages.cache.get(id);
  if (!ref && message.reference?.channelId === message.channelId) {
    ref = await withTimeout(
      message.fetchReference(),
      REFERENCE_FETCH_TIMEOUT_MS,
      "fetching a replied-to message",
    ).catch(() => undefined);
  }
  return ref ? { id: ref.id, author: userView(ref.author), content: ref.content } : null;
}

export function interactionView(interaction: ChatInputCommandInteraction): DiscordInteractionView {
  const channel = interaction.channel;
  return {
    id: interaction.id,
    commandName: interaction.commandName,
    args: "",
    channelId: interaction.channelId,
    guildId: interaction.guildId ?? null,
    threadParentId: channel?.isThread() ? channel.parentId : null,
    user: userView(interaction.user),
  };
}

export function buttonView(interaction: ButtonInteraction): DiscordButtonView {
  const channel = interaction.channel;
  return {
    customId: interaction.customId,
    channelId: interaction.channelId,
    guildId: interaction.guildId ?? null,
    threadParentId: channel?.isThread() ? channel.parentId : null,
    user: userView(interaction.user),
  };
}
