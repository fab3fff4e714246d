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
