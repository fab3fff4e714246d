/**
 * Slack events → InboundMessage, and the decisions around it: which messages
 * the bot answers (DMs, mentions, its threads, groupPolicy), which it never
 * takes (its own, other bots', edits), session keys (one per DM, one per
 * thread in channels) and the thread (the bus's threadId) that keeps replies in it.
 * Pure: the adapter supplies what needs the network (thread membership,
 * downloaded files, user names).
 */
import * as z from "zod";
import type { InboundMessage, ReplyPlace } from "../../bus/types.js";
import { COMMANDS, isCommandName } from "../../bus/commands.js";
import { slackToPlainText } from "./format.js";

export const CHANNEL_NAME = "slack";

export const SlackFileSchema = z.object({
  id: z.string(),
  name: z.string().nullish(),
  title: z.string().nullish(),
  mimetype: z.string().nullish(),
  size: z.number().nullish(),
  url_private: z.string().nullish(),
  url_private_download: z.string().nullish(),
  /** "hosted", "external", "snippet", "tombstone" (deleted), "hidden_by_limit" (free plan). */
  mode: z.string().nullish(),
  /** "check_file_info": a Slack Connect file whose details need files.info. */
  file_access: z.string().nullish(),
  /** "slack_audio" / "slack_video": a clip recorded in Slack. */
  subtype: z.string().nullish(),
});
export type SlackFile = z.infer<typeof SlackFileSchema>;

/** The part of `message` and `app_mention` events palaver reads. */
export const SlackMessageEventSchema = z.object({
  type: z.enum(["message", "app_mention"]),
  subtype: z.string().nullish(),
  channel: z.string(),
  /** "im", "channel", "group" (private channel), "mpim"; absent on app_mention. */
  channel_type: z.string().nullish(),
  user: z.string().nullish(),
  bot_id: z.string().nullish(),
  text: z.string().nullish(),
  ts: z.string(),
  thread_ts: z.string().nullish(),
  team: z.string().nullish(),
  files: z.array(SlackFileSchema).nullish(),
});
export type SlackMessageEvent = z.infer<typeof SlackMessageEventSchema>;

/** The fields of a slash command invocation palaver reads. */
export const SlackCommandSchema = z.object({
  command: z.string(),
  text: z.string().default(""),
  user_id: z.string(),
  user_name: z.string().nullish(),
  channel_id: z.string(),
  channel_name: z.string().nullish(),
  team_id: z.string().nullish(),
});
export type SlackCommand = z.infer<typeof SlackCommandSchema>;

export interface BotIdentity {
  /** The bot's user id (U...), as in `<@U...>` mentions. */
  userId: string;
  /** The bot id (B...) its own messages carry. */
  botId?: string;
  /** The bot's workspace (T...). */
  teamId?: string;
}

export interface SlackPolicy {
  groupPolicy: "mention" | "open" | "allowlist";
  groupAllowFrom: readonly string[];
  replyInThread: boolean;
  dmEnabled: boolean;
}

/** Message subtypes that are a person writing; everything else (edits, joins, bot posts) is not. */
const USER_SUBTYPES = new Set(["file_share", "thread_broadcast"]);

export type Route =
  | { kind: "accept"; why: "dm" | "mention" | "open" | "allowlist" | "thread" }
  | { kind: "ignore"; why: string }
  /** A thread reply without a mention: taken only if the bot is part of that thread. */
  | { kind: "checkThread"; threadTs: string };

/**
 * Whether the bot takes this event. `botInThread` is what the adapter knows
 * about the event's thread: true/false, or undefined when it has to look.
 */
export function routeEvent(
  event: SlackMessageEvent,
  bot: BotIdentity,
  policy: SlackPolicy,
  botInThread?: boolean,
): Route {
  if (isFromBot(event, bot)) return { kind: "ignore", why: "from a bot" };
  if (event.subtype && !USER_SUBTYPES.has(event.subtype))
    return { kind: "ignore", why: `subtype ${event.subtype}` };
  if (!event.user) return { kind: "ignore", why: "no user" };
  if (isDirect(event)) {
    return policy.dmEnabled
      ? { kind: "accept", why: "dm" }
      : { kind: "ignore", why: "DMs disabled (dm.enabled)" };
  }
  switch (policy.groupPolicy) {
    case "open":
      return { kind: "accept", why: "open" };
    case "allowlist":
      return policy.groupAllowFrom.includes(event.channel)
        ? { kind: "accept", why: "allowlist" }
        : { kind: "ignore", why: "channel not in groupAllowFrom" };
    case "mention": {
      if (event.type === "app_mention" || mentions(event.text ?? "", bot.userId)) {
        return { kind: "accept", why: "mention" };
      }
      const thread = event.thread_ts;
      if (!thread || thread === event.ts) return { kind: "ignore", why: "not mentioned" };
      if (botInThread === undefined) return { kind: "checkThread", threadTs: thread };
      return botInThread
        ? { kind: "accept", why: "thread" }
        : { kind: "ignore", why: "not mentioned, not in thread" };
    }
  }
}

export function isFromBot(event: SlackMessageEvent, bot: BotIdentity): boolean {
  // Any bot_id: this bot's posts and every other app's (bots answering bots would loop).
  return Boolean(event.bot_id) || event.subtype === "bot_message" || event.user === bot.userId;
}

/** A direct message: channel_type "im", or (app_mention carries none) a D... channel id. */
export function isDirect(event: { channel: string; channel_type?: string | null }): boolean {
  if (event.channel_type) return event.channel_type === "im";
  return event.channel.startsWith("D");
}

export function mentions(text: string, botUserId: string): boolean {
  return text.includes(`<@${botUserId}>`) || text.includes(`<@${botUserId}|`);
}

/** Removes every mention of the bot (`<@U1>`, `<@U1|name>`) and the spaces around it. */
export function stripMention(text: string, botUserId: string): string {
  const id = botUserId.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return text
    .replace(new RegExp(`\\s*<@${id}(?:\\|[^>]*)?>[,:]?\\s*`, "g"), " ")
    .replace(/[ \t]{2,}/g, " ")
    .trim();
}

/**
 * `@palaver stop` → "/stop": a command word alone right after the mention
 * (Slack takes a leading "/" as its own slash command, so this is how threads
 * get commands). Anything longer is a message, not a command.
 */
export function commandAfterMention(text: string, botUserId: string): string | null {
  const id = botUserId.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const match = new RegExp(`^\\s*<@${id}(?:\\|[^>]*)?>[,:]?\\s+/?([a-z]+)[.!]?\\s*$`, "i").exec(text);
  const word = match?.[1]?.toLowerCase();
  return word && Object.hasOwn(COMMANDS, word) ? `/${word}` : null;
}

/** Where the reply goes: the event's thread, or (in channels, with replyInThread) a new thread under it. */
export function replyThreadOf(event: SlackMessageEvent, policy: SlackPolicy): string | undefined {
  if (event.thread_ts) return event.thread_ts;
  if (!isDirect(event) && policy.replyInThread) return event.ts;
  return undefined;
}

/** One session per DM; in channels one per thread (`slack:C:THREAD_TS`), else the channel. */
export function sessionKeyFor(channel: string, direct: boolean, threadTs: string | undefined): string {
  return !direct && threadTs ? `${CHANNEL_NAME}:${channel}:${threadTs}` : `${CHANNEL_NAME}:${channel}`;
}

/** `channel:ts`, the same for the `message` and the `app_mention` of one message. */
export function eventKey(event: { channel: string; ts: string }): string {
  return `${event.channel}:${event.ts}`;
}

export interface InboundExtras {
  /**
   * The sender's Slack username, when known (an alias allowFrom may list).
   * Only for members of the bot's own workspace: a Slack Connect guest may
   * have the same username as someone allowed here.
   */
  senderName?: string;
}

/**
 * The message the bus carries (its files still to be fetched), or null when
 * there is nothing to say (no text, no files).
 */
export function toInbound(
  event: SlackMessageEvent,
  bot: BotIdentity,
  policy: SlackPolicy,
  extras: InboundExtras = {},
): InboundMessage | null {
  if (!event.user) return null;
  const raw = event.text ?? "";
  const command = commandAfterMention(raw, bot.userId);
  const content = command ?? slackToPlainText(stripMention(raw, bot.userId)).trim();
  if (content === "" && !event.files?.length) return null;
  const direct = isDirect(event);
  const threadTs = replyThreadOf(event, policy);
  return {
    channel: CHANNEL_NAME,
    senderId: event.user,
    chatId: event.channel,
    content,
    sessionKey: sessionKeyFor(event.channel, direct, threadTs),
    messageId: event.ts,
    isGroup: !direct,
    ...(extras.senderName ? { senderAliases: [extras.senderName] } : {}),
    ...(threadTs ? { threadId: threadTs } : {}),
    metadata: {
      channelType: event.channel_type ?? (direct ? "im" : "channel"),
      ...(event.team ? { teamId: event.team } : {}),
      ...(extras.senderName ? { senderName: extras.senderName } : {}),
    },
  };
}

/** A Slack message as the channel takes it: typed fields, never read back out of `metadata`. */
export interface MappedMessage {
  inbound: InboundMessage;
  /** Messages with the same key reach the bus in the order they arrived: one Slack channel or DM. */
  conversation: string;
  /** The thread the reply goes to, if any. */
  threadTs?: string;
  /** The files shared with it, not fetched yet. */
  files: SlackFile[];
}

/** toInbound with the typed fields the channel needs; null when there is nothing to say. */
export function mapMessage(
  event: SlackMessageEvent,
  bot: BotIdentity,
  policy: SlackPolicy,
  extras: InboundExtras = {},
): MappedMessage | null {
  const inbound = toInbound(event, bot, policy, extras);
  if (!inbound) return null;
  const threadTs = replyThreadOf(event, policy);
  return {
    inbound,
    conversation: event.channel,
    ...(threadTs ? { threadTs } : {}),
    files: event.files ?? [],
  };
}

/**
 * `/palaver stop` → "/stop" (and new, help, status, pairing); a bare `/palaver` is
 * /help; any other text is a message to the assistant.
 */
export function slashCommandText(text: string): string {
  const trimmed = text.trim();
  if (trimmed === "") return "/help";
  const [first = "", ...rest] = trimmed.split(/\s+/);
  const word = first.replace(/^\//, "").toLowerCase();
  if (!isCommandName(word)) return trimmed;
  return rest.length ? `/${word} ${rest.join(" ")}` : `/${word}`;
}

/**
 * A slash command as a message from that user in that chat. Slack does not
 * allow slash commands in threads, so in a channel the command goes to the
 * thread the user last talked to the bot in (`recentThreadTs`), if any.
 */
export function slashCommandToInbound(
  cmd: SlackCommand,
  recentThreadTs?: string,
  senderName?: string,
): InboundMessage {
  const direct = isDirectCommand(cmd);
  const threadTs = commandThreadOf(cmd, recentThreadTs);
  const name = senderName;
  return {
    channel: CHANNEL_NAME,
    senderId: cmd.user_id,
    chatId: cmd.channel_id,
    content: slashCommandText(slackToPlainText(cmd.text)),
    sessionKey: sessionKeyFor(cmd.channel_id, direct, threadTs),
    ...(name ? { senderAliases: [name] } : {}),
    isGroup: !direct,
    ...(threadTs ? { threadId: threadTs } : {}),
    metadata: {
      channelType: direct ? "im" : "channel",
      slashCommand: cmd.command,
      ...(cmd.team_id ? { teamId: cmd.team_id } : {}),
      ...(name ? { senderName: name } : {}),
    },
  };
}

function isDirectCommand(cmd: SlackCommand): boolean {
  return cmd.channel_id.startsWith("D") || cmd.channel_name === "directmessage";
}

/** Slash commands cannot be sent in threads: in a channel they go to the user's recent thread. */
function commandThreadOf(cmd: SlackCommand, recentThreadTs: string | undefined): string | undefined {
  return isDirectCommand(cmd) ? undefined : recentThreadTs;
}

/** slashCommandToInbound with the typed fields the channel needs. */
export function mapCommand(cmd: SlackCommand, recentThreadTs?: string, senderName?: string): MappedMessage {
  const inbound = slashCommandToInbound(cmd, recentThreadTs, senderName);
  const threadTs = commandThreadOf(cmd, recentThreadTs);
  return { inbound, conversation: cmd.channel_id, ...(threadTs ? { threadTs } : {}), files: [] };
}

/** The thread a reply belongs in: the bus's threadId (set by toInbound), when it is a Slack ts. */
export function threadTsOf(place: ReplyPlace): string | undefined {
  const ts = place.threadId;
  return ts !== undefined && /^\d+(\.\d+)?$/.test(ts) ? ts : undefined;
}

/**
 * Only Slack's own file hosts (or the configured API host, for a fake or a
 * proxy) get the bot token: a URL from anywhere else is not fetched with it.
 */
export function isSlackFileUrl(url: string, apiUrl: string): boolean {
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return false;
  }
  if (
    target.protocol === "https:" &&
    (target.hostname === "slack.com" || target.hostname.endsWith(".slack.com"))
  ) {
    return true;
  }
  if (!apiUrl) return false;
  try {
    return new URL(apiUrl).origin === target.origin;
  } catch {
    return false;
  }
}

/** The file name to save an attachment under. */
export function fileNameOf(file: SlackFile): string {
  return file.name || file.title || file.id;
}
