/**
 * Discord events → InboundMessage, pure. views.ts turns the gateway's raw
 * payloads into the small views below; everything that decides whether and
 * how a message reaches the agent (group policy, mention stripping, session
 * keys, reply context) happens here, without network.
 */
import type { InboundMessage } from "../../bus/types.js";
import { COMMANDS } from "../../bus/commands.js";

export const CHANNEL = "discord";

/** Message types a person writes: DEFAULT and REPLY. Joins, pins, thread starters ... are not. */
const USER_MESSAGE_TYPES = new Set([0, 19]);
/** How much of the message replied to goes along with the reply. */
const MAX_QUOTE_CHARS = 600;

export interface DiscordUserView {
  id: string;
  /** The unique @username. */
  username: string;
  /** The display name, when it differs from the username. */
  displayName?: string | null;
  bot: boolean;
}

export interface DiscordAttachmentView {
  id: string;
  name: string;
  url: string;
  size: number;
  contentType: string | null;
}

/** Where a message or interaction happened. */
export interface DiscordPlaceView {
  channelId: string;
  /** null in DMs. */
  guildId: string | null;
  /** The parent channel when channelId is a thread, else null. */
  threadParentId: string | null;
}

export interface DiscordMessageView extends DiscordPlaceView {
  id: string;
  /** Discord's message type number. */
  type: number;
  system: boolean;
  webhookId: string | null;
  author: DiscordUserView;
  content: string;
  mentions: DiscordUserView[];
  attachments: DiscordAttachmentView[];
  /** Recorded in a Discord client's voice-message button (flag IS_VOICE_MESSAGE). */
  voiceMessage?: boolean;
  /** The message this one replies to, when Discord sent it along. */
  referenced: { id: string; author: DiscordUserView; content: string } | null;
}

export interface DiscordInteractionView extends DiscordPlaceView {
  id: string;
  commandName: string;
  /** The command's text option ("args"), if any. */
  args: string;
  user: DiscordUserView;
}

export type GroupPolicy = "mention" | "open" | "allowlist";

export interface DiscordPolicy {
  botId: string;
  groupPolicy: GroupPolicy;
  /** Channel ids for the allowlist policy. */
  groupAllowFrom: readonly string[];
}

export type Admission = { accept: true } | { accept: false; reason: string };

/** Whether a message goes to the agent. Access (allowFrom) is not decided here but by the channel manager. */
export function admitMessage(view: DiscordMessageView, policy: DiscordPolicy): Admission {
  if (view.author.id === policy.botId) return { accept: false, reason: "own message" };
  if (view.author.bot || view.webhookId) return { accept: false, reason: "from a bot" };
  if (view.system || !USER_MESSAGE_TYPES.has(view.type)) return { accept: false, reason: "system message" };
  if (view.guildId !== null) {
    const place = admitPlace(view, policy);
    if (!place.accept) return place;
    if (policy.groupPolicy === "mention" && !addressesBot(view, policy.botId)) {
      return { accept: false, reason: "not mentioned" };
    }
  }
  if (messageText(view, policy.botId) === "" && view.attachments.length === 0) {
    return { accept: false, reason: "empty" };
  }
  return { accept: true };
}

/** Slash commands are addressed to the bot by nature; only the allowlist limits where. */
export function admitInteraction(view: DiscordInteractionView, policy: DiscordPolicy): Admission {
  if (view.user.bot) return { accept: false, reason: "from a bot" };
  if (!isSlashCommand(view.commandName)) return { accept: false, reason: "unknown command" };
  return view.guildId === null ? { accept: true } : admitPlace(view, policy);
}

function admitPlace(place: DiscordPlaceView, policy: DiscordPolicy): Admission {
  if (policy.groupPolicy !== "allowlist") return { accept: true };
  const allowed =
    policy.groupAllowFrom.includes(place.channelId) ||
    (place.threadParentId !== null && policy.groupAllowFrom.includes(place.threadParentId));
  return allowed ? { accept: true } : { accept: false, reason: "channel not in groupAllowFrom" };
}

/** An @mention of the bot, or a reply to one of its messages. */
export function addressesBot(view: DiscordMessageView, botId: string): boolean {
  return mentionPattern(botId).test(view.content) || view.referenced?.author.id === botId;
}

function mentionPattern(userId: string, flags = ""): RegExp {
  return new RegExp(`<@!?${userId}>`, flags);
}

/** Removes mentions of the bot (`<@id>` and the older `<@!id>`), so "@bot /new" is the command /new. */
export function stripBotMention(text: string, botId: string): string {
  return text
    .replace(mentionPattern(botId, "g"), " ")
    .replace(/[ \t]{2,}/g, " ")
    .trim();
}

/** Other people's mentions become readable @names for the model. */
export function readableMentions(text: string, mentions: readonly DiscordUserView[]): string {
  let out = text;
  for (const user of mentions) out = out.replace(mentionPattern(user.id, "g"), `@${user.username}`);
  return out;
}

function messageText(view: DiscordMessageView, botId: string): string {
  return readableMentions(stripBotMention(view.content, botId), view.mentions);
}

/** Each DM, guild channel and thread is its own conversation; a thread's id is its channel id. */
export function sessionKeyFor(place: DiscordPlaceView): string {
  return `${CHANNEL}:${place.channelId}`;
}

export function placeMetadata(place: DiscordPlaceView): Record<string, unknown> {
  return {
    channelId: place.channelId,
    guildId: place.guildId,
    ...(place.threadParentId !== null ? { parentId: place.threadParentId } : {}),
  };
}

/** A thread is a channel of its own on Discord: its id is the chatId and the bus's threadId. */
export function threadOf(place: DiscordPlaceView): { threadId?: string } {
  return place.threadParentId !== null ? { threadId: place.channelId } : {};
}

export function senderMetadata(user: DiscordUserView): { senderName: string; senderAliases: string[] } {
  return {
    senderName: user.displayName || user.username,
    // Usernames are unique on Discord, so allowFrom may name them instead of ids; an all-digit
    // username is left out, or it could pass for somebody else's numeric id.
    senderAliases: /^\d+$/.test(user.username) ? [] : [user.username],
  };
}

/** The bus message for an admitted message. */
export function toInbound(view: DiscordMessageView, policy: DiscordPolicy): InboundMessage {
  const parts: string[] = [];
  if (view.referenced) parts.push(quoteOf(view.referenced, policy.botId));
  const text = messageText(view, policy.botId);
  if (text) parts.push(text);
  const { senderName, senderAliases } = senderMetadata(view.author);
  return {
    channel: CHANNEL,
    senderId: view.author.id,
    chatId: view.channelId,
    content: parts.join("\n\n"),
    sessionKey: sessionKeyFor(view),
    messageId: view.id,
    senderAliases,
    isGroup: view.guildId !== null,
    ...threadOf(view),
    metadata: { ...placeMetadata(view), senderName },
  };
}

function quoteOf(ref: NonNullable<DiscordMessageView["referenced"]>, botId: string): string {
  const who = ref.author.id === botId ? "your earlier message" : `@${ref.author.username}`;
  const text = ref.content.trim();
  if (!text) return `[In reply to ${who}]`;
  const cut = text.length > MAX_QUOTE_CHARS ? `${text.slice(0, MAX_QUOTE_CHARS)}…` : text;
  return `[In reply to ${who}: "${cut}"]`;
}

/** The bus message for an admitted slash command: the same text a typed command would be. */
export function interactionToInbound(view: DiscordInteractionView): InboundMessage {
  const { senderName, senderAliases } = senderMetadata(view.user);
  return {
    channel: CHANNEL,
    senderId: view.user.id,
    chatId: view.channelId,
    content: view.args ? `/${view.commandName} ${view.args}` : `/${view.commandName}`,
    sessionKey: sessionKeyFor(view),
    senderAliases,
    isGroup: view.guildId !== null,
    ...threadOf(view),
    interactionId: view.id,
    metadata: { ...placeMetadata(view), senderName },
  };
}

export interface SlashCommand {
  name: string;
  description: string;
}

/** The chat commands, registered as Discord application commands (descriptions max 100 chars). */
export const SLASH_COMMANDS: readonly SlashCommand[] = Object.entries(COMMANDS).map(([name, what]) => ({
  name,
  description: what.slice(0, 100),
}));

function isSlashCommand(name: string): boolean {
  return SLASH_COMMANDS.some((c) => c.name === name);
}
