/** Messages that travel on the bus. docs/architecture.md, "The turn lifecycle", describes their order. */

/**
 * Where in its chat a message was said, so the replies go there too. Set by the channel that
 * received the message and carried unchanged by Origin, OutboundMessage, TurnEvent and the stores.
 */
export interface ReplyPlace {
  /**
   * The thread or forum topic: Telegram's message_thread_id (in decimal), Slack's thread_ts, Discord's
   * thread channel id (there it is the chatId too). One string for every platform; each converts at its edge.
   */
  threadId?: string;
  /** A Discord slash command's interaction: the reply answers it (the adapter holds it while it is open). */
  interactionId?: string;
}

/** Only the reply place of `from`, without undefined keys: spread into the message that goes back. */
export function replyPlaceOf(from: ReplyPlace): ReplyPlace {
  return {
    ...(from.threadId !== undefined ? { threadId: from.threadId } : {}),
    ...(from.interactionId !== undefined ? { interactionId: from.interactionId } : {}),
  };
}

export interface InboundMessage extends ReplyPlace {
  /** "telegram" | "slack" | "discord" | "cli" | "system" ... */
  channel: string;
  /** Platform user id, as a string. */
  senderId: string;
  /** Platform chat/channel id, as a string. */
  chatId: string;
  content: string;
  /** Local file paths of downloaded attachments. */
  media?: string[];
  /** The platform's id of this message (Telegram message_id, Slack ts, Discord id): replies quote it. */
  messageId?: string;
  /** Other names of the sender (a Telegram @username), matched against allowFrom and approvers. */
  senderAliases?: string[];
  /** Said by the platform: a group chat (true) or a direct message (false). Unsaid counts as a group. */
  isGroup?: boolean;
  /**
   * What only the channel that wrote it reads (platform leftovers such as a chat type); it travels
   * with the replies (Origin, OutboundMessage). Fields read across files are typed above and below.
   */
  metadata?: Record<string, unknown>;
  /** Defaults to `${channel}:${chatId}`; threads add a suffix. */
  sessionKey?: string;
  /** The message's id in the journal (daemon/journal.ts), once journaled: its turn is marked by it. */
  journalId?: string;
  /**
   * The id its turn runs under, when given (cluster mode: the same on every attempt, so a turn run
   * again on another instance is recognised by its replies); absent: a new one per turn.
   */
  turnId?: string;
}

/**
 * What an outbound message is. "final" is a reply to deliver (journaled, retried); "progress"
 * (model text before tool calls) and "toolHint" (`read_file("notes.md")`) are shown when the
 * configuration wants them and never retried; "question" is a message with buttons (retried like a
 * final, never journaled: after a restart it is stale); "edit" rewrites a question once it is
 * answered or expired (tried once); "delta" is the turn's reply so far while the model writes it
 * (`content` is the whole text so far; channels that stream show it as a live preview that the
 * turn's final or progress message then replaces); "plan" is the turn's checklist (todo_write) as it
 * stands (`content` is the whole checklist): shown as one message of its own, sent once and edited
 * in place while the turn runs, left with its last state when the turn ends; never journaled,
 * never the turn's reply. A message may belong to a turn (`turnId`) or to none (a cron delivery,
 * the `message` tool): only turn events start or end a turn.
 */
export type OutboundKind = "final" | "progress" | "toolHint" | "question" | "edit" | "delta" | "plan";

/** One button under a question. */
export interface Choice {
  /** Short and URL-safe ([a-z0-9_-], at most 16 characters): it travels in the button's data. */
  id: string;
  label: string;
  style?: "primary" | "danger";
}

/**
 * A message that asks something (an approval, the ask_human tool). Channels show the choices as
 * buttons (Telegram inline keyboard, Slack Block Kit, Discord components); a press comes back
 * through `InboundSink.choose`. A channel without buttons lists them as text ("reply yes or no").
 */
export interface Question {
  /** Short and URL-safe ([a-z0-9], at most 12 characters), unique while open. */
  id: string;
  choices: Choice[];
}

export interface OutboundMessage extends ReplyPlace {
  channel: string;
  chatId: string;
  content: string;
  media?: string[];
  replyTo?: string;
  kind?: OutboundKind;
  /** The turn that produced it, when one did. */
  turnId?: string;
  metadata?: Record<string, unknown>;
  /** kind "question": the choices to show under the text. */
  question?: Question;
  /**
   * kind "edit": the question message to rewrite. Its text becomes `content` and its buttons go.
   * `ref` is the platform's id of that message as the channel's send returned it (known after a
   * restart); without it the channel uses what it remembers for `questionId`, else sends `content`
   * as a new message.
   */
  edit?: { questionId: string; ref?: string };
}

export type TurnOutcome = "done" | "stopped" | "failed";

/**
 * The start and the end of one turn of the agent in one chat. Every turnStart is followed by exactly
 * one turnEnd with the same id (the loop publishes it from a `finally`), after the turn's replies.
 * Typing indicators and receipt reactions key on the id, so a reply that belongs to another turn or
 * to none never ends them. Every message the loop takes off a lane is a turn, commands (/new, /help,
 * /status) included: their replies carry the turn id too. /stop is not a turn: it is answered at once,
 * outside the lanes, with no turn id, and the turn it stops ends with outcome "stopped".
 */
export interface TurnEvent extends ReplyPlace {
  kind: "turnStart" | "turnEnd";
  turnId: string;
  /** The chat the turn answers (for background work: its origin chat). */
  channel: string;
  chatId: string;
  /** The platform id of the message that started the turn, when a person sent one. */
  replyTo?: string;
  /** The chat's inbound metadata (what only its channel reads). */
  metadata?: Record<string, unknown>;
  /** Background work (cron, heartbeat, subagent reports) rather than a person waiting. */
  background?: boolean;
  /** Set on turnEnd. */
  outcome?: TurnOutcome;
}

export function sessionKeyOf(msg: InboundMessage): string {
  return msg.sessionKey ?? `${msg.channel}:${msg.chatId}`;
}

/** The channel of messages that background work (subagents, cron, heartbeat) publishes. */
export const SYSTEM_CHANNEL = "system";

/** The channel of `palaver chat`, the terminal (nanobot's name for it). */
export const TERMINAL_CHANNEL = "cli";

/** The chat that background work reports back to. */
export interface Origin extends ReplyPlace {
  channel: string;
  chatId: string;
  /** The session the exchange is saved in; default `${channel}:${chatId}`. */
  sessionKey?: string;
  /** The chat's inbound metadata (what only its channel reads). */
  metadata?: Record<string, unknown>;
}

export interface SystemMessageOptions {
  /** Who reports: "subagent", "cron", "heartbeat". */
  senderId: string;
  content: string;
  origin: Origin;
  /** The session the turn runs in; default the origin's session. */
  sessionKey?: string;
  metadata?: Record<string, unknown>;
}

/** A message from background work, answered by the agent in (and delivered to) its origin chat. */
export function systemMessage(opts: SystemMessageOptions): InboundMessage {
  const { origin } = opts;
  return {
    channel: SYSTEM_CHANNEL,
    senderId: opts.senderId,
    chatId: `${origin.channel}:${origin.chatId}`,
    content: opts.content,
    sessionKey: opts.sessionKey ?? origin.sessionKey ?? `${origin.channel}:${origin.chatId}`,
    metadata: { ...opts.metadata, origin },
  };
}

/** Where the replies to a message go: the origin of a system message, else its own chat. */
export function originOf(msg: InboundMessage): Origin {
  if (msg.channel === SYSTEM_CHANNEL) {
    const origin = msg.metadata?.origin as Origin | undefined;
    if (origin && typeof origin.channel === "string" && typeof origin.chatId === "string") return origin;
  }
  return {
    channel: msg.channel,
    chatId: msg.chatId,
    sessionKey: sessionKeyOf(msg),
    ...replyPlaceOf(msg),
    metadata: msg.metadata,
  };
}
