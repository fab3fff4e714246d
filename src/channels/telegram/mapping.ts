/**
 * Telegram messages → InboundMessage. Pure: group policy, mention stripping,
 * reply context, attachment choice, session keys, albums and where replies go.
 */
import type { ChatMemberUpdated, Message, MessageEntity, User } from "grammy/types";
import type { InboundMessage } from "../../bus/types.js";

export const CHANNEL = "telegram";

export interface BotIdentity {
  id: number;
  /** Without the "@". */
  username: string;
}

export interface GroupRules {
  groupPolicy: "mention" | "open" | "allowlist";
  groupAllowFrom: readonly string[];
}

export type AttachmentKind = "photo" | "document" | "voice" | "audio" | "video" | "video_note" | "animation";

export interface Attachment {
  kind: AttachmentKind;
  fileId: string;
  /** A name for the downloaded file (extension included). */
  fileName: string;
  /** Size Telegram declares, when it does. */
  sizeBytes?: number;
  mimeType?: string;
}

export interface MappedMessage {
  /** Content is the text (or caption) with context lines; `media` is filled in once files are downloaded. */
  inbound: InboundMessage;
  /** The chat, or the chat's forum topic: messages and typing are kept in order per conversation. */
  conversation: string;
  /** The forum topic, when the message is in one. */
  threadId?: number;
  attachments: Attachment[];
  mediaGroupId?: string;
  /** `/start` addressed to this bot: the adapter greets the user itself. */
  isStart: boolean;
}

/** What the adapter puts in metadata (the thread is the message's typed `threadId`). */
export interface TelegramMetadata {
  chatType: string;
  mediaGroupId?: string;
}

const QUOTE_MAX = 300;

export function isGroupChat(msg: Pick<Message, "chat">): boolean {
  return msg.chat.type === "group" || msg.chat.type === "supergroup";
}

/** The forum topic a message belongs to, if any ("General" has none). */
export function topicOf(msg: Pick<Message, "is_topic_message" | "message_thread_id">): number | undefined {
  return msg.is_topic_message && msg.message_thread_id !== undefined ? msg.message_thread_id : undefined;
}

/** Each chat is a session; each forum topic is one of its own. */
export function sessionKeyFor(chatId: string | number, threadId?: number): string {
  return threadId === undefined ? `${CHANNEL}:${chatId}` : `${CHANNEL}:${chatId}:${threadId}`;
}

interface Command {
  name: string;
  /** The @bot suffix, without "@", if any. */
  target?: string;
}

export function commandOf(text: string | undefined): Command | null {
  const match = /^\/([A-Za-z0-9_]+)(?:@([A-Za-z0-9_]+))?(?=\s|$)/.exec(text ?? "");
  if (!match) return null;
  return { name: match[1]!.toLowerCase(), ...(match[2] ? { target: match[2] } : {}) };
}

function textOf(msg: Message): { text: string; entities: MessageEntity[] } {
  if (msg.text !== undefined) return { text: msg.text, entities: msg.entities ?? [] };
  return { text: msg.caption ?? "", entities: msg.caption_entities ?? [] };
}

function sameName(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase();
}

/** Whether the message @mentions the bot (by entity, or in the text when entities are missing). */
export function mentionsBot(msg: Message, bot: BotIdentity): boolean {
  const { text, entities } = textOf(msg);
  for (const e of entities) {
    if (e.type === "mention" && sameName(text.slice(e.offset + 1, e.offset + e.length), bot.username))
      return true;
    if (e.type === "text_mention" && e.user.id === bot.id) return true;
  }
  return mentionPattern(bot.username).test(text);
}

function mentionPattern(username: string): RegExp {
  return new RegExp(`(^|[^\\w@])@${username.replace(/[^\w]/g, "")}(?!\\w)`, "i");
}

/** A reply to the root message of a forum topic is how Telegram marks "in this topic", not a real reply. */
function isTopicRoot(msg: Message, replied: Message): boolean {
  return (
    replied.forum_topic_created !== undefined ||
    (msg.is_topic_message === true && replied.message_id === msg.message_thread_id)
  );
}

function realReply(msg: Message): Message | undefined {
  const replied = msg.reply_to_message;
  return replied && !isTopicRoot(msg, replied) ? replied : undefined;
}

/**
 * Whether a group message is for the bot. `mention`: @mentioned, a reply to
 * the bot, or a command; `open`: everything; `allowlist`: everything in the
 * listed chats. Commands addressed to another bot are never ours.
 */
export function acceptedInGroup(msg: Message, bot: BotIdentity, rules: GroupRules): boolean {
  const command = commandOf(textOf(msg).text);
  if (command?.target && !sameName(command.target, bot.username)) return false;
  switch (rules.groupPolicy) {
    case "open":
      return true;
    case "allowlist":
      return rules.groupAllowFrom.includes(String(msg.chat.id));
    case "mention":
      return command !== null || mentionsBot(msg, bot) || realReply(msg)?.from?.id === bot.id;
  }
}

/** Removes the bot's @username: from mentions and from a `/command@bot` suffix. */
export function stripBotMention(text: string, username: string): string {
  const name = username.replace(/[^\w]/g, "");
  return text
    .replace(new RegExp(`^(/[A-Za-z0-9_]+)@${name}(?=\\s|$)`, "i"), "$1")
    .replace(new RegExp(`(^|[^\\w@])@${name}(?!\\w)[,:]?`, "gi"), "$1")
    .replace(/[ \t]{2,}/g, " ")
    .trim();
}

function displayName(user: User | undefined): string {
  if (!user) return "someone";
  const full = [user.first_name, user.last_name].filter(Boolean).join(" ");
  return full || (user.username ? `@${user.username}` : String(user.id));
}

function shorten(text: string, max = QUOTE_MAX): string {
  const flat = text.replace(/\s+/g, " ").trim();
  if (flat.length <= max) return flat;
  const cut = flat.slice(0, max);
  // Never leave half a surrogate pair at the end.
  return `${/[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut}…`;
}

function kindLabel(msg: Message): string {
  if (msg.photo) return "a photo";
  if (msg.voice) return "a voice message";
  if (msg.audio) return "an audio file";
  if (msg.video || msg.video_note) return "a video";
  if (msg.animation) return "an animation";
  if (msg.document) return `a file (${msg.document.file_name ?? "document"})`;
  if (msg.sticker) return `a sticker ${msg.sticker.emoji ?? ""}`.trim();
  return "a message";
}

/** "[Reply to Alice: …]" with the part the user quoted, else the replied message's text. */
export function replyContext(msg: Message, bot: BotIdentity): string | null {
  const replied = realReply(msg);
  const quote = msg.quote?.text;
  if (replied) {
    const who = replied.from?.id === bot.id ? "your earlier message" : displayName(replied.from);
    const text = quote ?? replied.text ?? replied.caption;
    return `[Reply to ${who}: ${text ? shorten(text) : kindLabel(replied)}]`;
  }
  if (msg.external_reply) {
    return quote
      ? `[Reply to a message from another chat: ${shorten(quote)}]`
      : "[Reply to a message from another chat]";
  }
  return null;
}

function forwardContext(msg: Message): string | null {
  const origin = msg.forward_origin;
  if (!origin) return null;
  switch (origin.type) {
    case "user":
      return `[Forwarded from ${displayName(origin.sender_user)}]`;
    case "hidden_user":
      return `[Forwarded from ${origin.sender_user_name}]`;
    case "chat":
      return `[Forwarded from ${origin.sender_chat.title ?? "a chat"}]`;
    case "channel":
      return `[Forwarded from ${origin.chat.title ?? "a channel"}]`;
  }
}

/** Things with no file to download that the model should still see. */
function otherContent(msg: Message): string | null {
  if (msg.location && !msg.venue) return `[Location: ${msg.location.latitude}, ${msg.location.longitude}]`;
  if (msg.venue)
    return `[Venue: ${msg.venue.title}, ${msg.venue.address} (${msg.venue.location.latitude}, ${msg.venue.location.longitude})]`;
  if (msg.contact)
    return `[Contact: ${[msg.contact.first_name, msg.contact.last_name].filter(Boolean).join(" ")}, ${msg.contact.phone_number}]`;
  if (msg.sticker) return `[Sticker ${msg.sticker.emoji ?? ""}]`.replace(" ]", "]");
  if (msg.poll) return `[Poll: ${msg.poll.question} — ${msg.poll.options.map((o) => o.text).join(" / ")}]`;
  if (msg.dice) return `[Dice ${msg.dice.emoji}: ${msg.dice.value}]`;
  return null;
}

const MIME_EXT: Record<string, string> = {
  "audio/ogg": ".ogg",
  "audio/mpeg": ".mp3",
  "audio/mp4": ".m4a",
  "audio/x-wav": ".wav",
  "audio/wav": ".wav",
  "video/mp4": ".mp4",
  "video/quicktime": ".mov",
  "image/jpeg": ".jpg",
  "image/png": ".png",
  "image/webp": ".webp",
  "application/pdf": ".pdf",
  "text/plain": ".txt",
};

function nameFor(
  kind: string,
  uniqueId: string,
  given: string | undefined,
  mime: string | undefined,
  ext: string,
): string {
  if (given?.trim()) return given;
  return `${kind}-${uniqueId}${(mime && MIME_EXT[mime]) ?? ext}`;
}

/** The files worth downloading: the largest photo size, and the one document/voice/audio/video. */
export function attachmentsOf(msg: Message): Attachment[] {
  const found: Attachment[] = [];
  const size = (n: number | undefined) => (n === undefined ? {} : { sizeBytes: n });
  const mime = (m: string | undefined) => (m === undefined ? {} : { mimeType: m });
  if (msg.photo?.length) {
    const largest = msg.photo.reduce((a, b) =>
      b.width * b.height > a.width * a.height ||
      (b.width * b.height === a.width * a.height && (b.file_size ?? 0) > (a.file_size ?? 0))
        ? b
        : a,
    );
    found.push({
      kind: "photo",
      fileId: largest.file_id,
      fileName: `photo-${largest.file_unique_id}.jpg`,
      ...size(largest.file_size),
      mimeType: "image/jpeg",
    });
  }
  // The same fields on every file type; only the kind and the name's fallback extension differ.
  const file = (
    kind: Attachment["kind"],
    f: {
      file_id: string;
      file_unique_id: string;
      file_size?: number;
      mime_type?: string;
      file_name?: string;
    },
    ext: string,
  ): Attachment => ({
    kind,
    fileId: f.file_id,
    fileName: nameFor(kind, f.file_unique_id, f.file_name, f.mime_type, ext),
    ...size(f.file_size),
    ...mime(f.mime_type),
  });
  if (msg.voice) found.push(file("voice", msg.voice, ".ogg"));
  if (msg.audio) found.push(file("audio", msg.audio, ".mp3"));
  if (msg.video) found.push(file("video", msg.video, ".mp4"));
  const note = msg.video_note;
  if (note)
    found.push({
      kind: "video_note",
      fileId: note.file_id,
      fileName: `video-note-${note.file_unique_id}.mp4`,
      ...size(note.file_size),
      mimeType: "video/mp4",
    });
  if (msg.animation) found.push(file("animation", msg.animation, ".mp4"));
  // An animation also carries a `document` copy of itself.
  else if (msg.document) found.push(file("document", msg.document, ""));
  return found;
}

/**
 * The message as palaver sees it, or null when it is not for the bot: not
 * from a person (bots, channels), or a group message the group policy does
 * not let through. Access (allowFrom) is NOT checked here: the manager does
 * it for every channel and tells refused senders their id.
 */
export function mapMessage(msg: Message, bot: BotIdentity, rules: GroupRules): MappedMessage | null {
  const from = msg.from;
  if (!from || from.is_bot || from.id === bot.id) return null;
  if (msg.chat.type === "channel") return null;
  const group = isGroupChat(msg);
  if (group && !acceptedInGroup(msg, bot, rules)) return null;

  const raw = textOf(msg).text;
  const text = stripBotMention(raw, bot.username);
  const attachments = attachmentsOf(msg);
  const command = commandOf(raw);
  // A command stays alone at the start of the content, where the agent loop looks for it.
  const context = command ? [] : [forwardContext(msg), replyContext(msg, bot)];
  const lines = [...context, text, otherContent(msg)].filter((l): l is string => l !== null && l !== "");
  if (lines.length === 0 && attachments.length === 0) return null; // service messages (joins, pins …)

  const threadId = topicOf(msg);
  const metadata: TelegramMetadata = {
    chatType: msg.chat.type,
    ...(msg.media_group_id ? { mediaGroupId: msg.media_group_id } : {}),
  };
  return {
    inbound: {
      channel: CHANNEL,
      senderId: String(from.id),
      chatId: String(msg.chat.id),
      content: lines.join("\n"),
      messageId: String(msg.message_id),
      isGroup: group,
      ...(from.username ? { senderAliases: [`@${from.username}`] } : {}),
      ...(threadId !== undefined ? { threadId: String(threadId) } : {}),
      metadata: { ...metadata },
      sessionKey: sessionKeyFor(msg.chat.id, threadId),
    },
    conversation: conversationKey(String(msg.chat.id), threadId),
    ...(threadId !== undefined ? { threadId } : {}),
    attachments,
    ...(msg.media_group_id ? { mediaGroupId: msg.media_group_id } : {}),
    isStart: command?.name === "start",
  };
}

/** An album arrives as one message per item; they become one message (first item's metadata, captions joined). */
export function mergeAlbum(parts: readonly MappedMessage[]): MappedMessage {
  const [first, ...rest] = parts;
  if (!first) throw new Error("mergeAlbum needs at least one part");
  if (rest.length === 0) return first;
  const contents = [...new Set(parts.map((p) => p.inbound.content).filter((c) => c !== ""))];
  return {
    ...first,
    inbound: { ...first.inbound, content: contents.join("\n") },
    attachments: parts.flatMap((p) => p.attachments),
  };
}

/** Where a reply goes: the chat, its forum topic (the bus's threadId as Telegram's number), the quote. */
export interface ReplyTarget {
  chatId: string;
  threadId?: number;
  /** The message to quote (when replyToMessage is on). */
  replyTo?: number;
}

export function replyTarget(
  msg: { chatId: string; replyTo?: string; threadId?: string },
  quote: boolean,
): ReplyTarget {
  const threadId = Number(msg.threadId);
  const replyTo = Number(msg.replyTo);
  return {
    chatId: msg.chatId,
    ...(msg.threadId !== undefined && Number.isInteger(threadId) && threadId > 0 ? { threadId } : {}),
    ...(quote && Number.isInteger(replyTo) && replyTo > 0 ? { replyTo } : {}),
  };
}

/** The typing indicator and album buffers are kept per chat and topic. */
export function conversationKey(chatId: string, threadId?: number): string {
  return threadId === undefined ? chatId : `${chatId}:${threadId}`;
}

/**
 * The user who closed their private chat with the bot (blocked it: "kicked"; or "left"), from a
 * my_chat_member update; undefined for anything else (groups, unblocking, promotions).
 */
export function leftPrivateChat(update: ChatMemberUpdated): string | undefined {
  if (update.chat.type !== "private") return undefined;
  const status = update.new_chat_member.status;
  return status === "kicked" || status === "left" ? String(update.from.id) : undefined;
}
