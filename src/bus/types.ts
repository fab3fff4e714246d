/** Messages that travel on the bus. See ARCHITECTURE.md, "Interfaces". */

export interface InboundMessage {
  /** "telegram" | "slack" | "discord" | "cli" | "system" ... */
  channel: string;
  /** Platform user id, as a string. */
  senderId: string;
  /** Platform chat/channel id, as a string. */
  chatId: string;
  content: string;
  /** Local file paths of downloaded attachments. */
  media?: string[];
  /** Message id, thread id, is_group ... */
  metadata?: Record<string, unknown>;
  /** Defaults to `${channel}:${chatId}`; threads add a suffix. */
  sessionKey?: string;
}

export type OutboundKind = "final" | "progress" | "toolHint";

export interface OutboundMessage {
  channel: string;
  chatId: string;
  content: string;
  media?: string[];
  replyTo?: string;
  kind?: OutboundKind;
  metadata?: Record<string, unknown>;
}

export function sessionKeyOf(msg: InboundMessage): string {
  return msg.sessionKey ?? `${msg.channel}:${msg.chatId}`;
}

/** The channel of messages that background work (subagents, cron, heartbeat) publishes. */
export const SYSTEM_CHANNEL = "system";

/** The chat that background work reports back to. */
export interface Origin {
  channel: string;
  chatId: string;
  /** The session the exchange is saved in; default `${channel}:${chatId}`. */
  sessionKey?: string;
  /** The chat's inbound metadata (thread ids ...), so replies stay in the thread. */
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
  return { channel: msg.channel, chatId: msg.chatId, sessionKey: sessionKeyOf(msg), metadata: msg.metadata };
}
