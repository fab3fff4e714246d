/**
 * What the channel contract suite (contract.test.ts) needs from each platform:
 * a real adapter wired to the loopback fake of that platform's API. The suite
 * owns the bus and the channel manager; a driver owns only its fake and the
 * adapter's construction. One driver per platform lives beside this file and
 * is listed in drivers.ts.
 */
import type { Channel } from "../../../src/channels/types.js";

/** What every driver's transcription endpoint answers for a voice note. */
export const VOICE_TRANSCRIPT = "hello from a voice note";

export interface RigOptions {
  /** A temporary workspace for downloads (the suite removes it). */
  workspace: string;
}

export interface PlatformRig {
  /**
   * The adapter, not started, built through the platform's real factory with a config where:
   * `transcription` points at the fake's OpenAI-style /audio/transcriptions endpoint (answering
   * VOICE_TRANSCRIPT); the typing indicator repeats every few tens of milliseconds; downloads go
   * to `workspace`.
   */
  channel: Channel;
  /** On the allow list; the suite adds it to the manager's allowFrom. */
  allowedSender: string;
  /** Not on the allow list. */
  strangerSender: string;
  /** The chat (direct message) where allowedSender's messages arrive; replies go there. */
  chatId: string;
  /**
   * A person sends a direct message through the fake (the platform's real wire format). `file` adds
   * a document or a voice note. Resolves once the fake has handed the event to the adapter.
   */
  userSends(from: string, text: string, file?: "document" | "voice"): Promise<void>;
  /**
   * A person writes in a group chat (a Telegram group, a Slack channel, a Discord server channel),
   * addressing the bot by a mention so the message is for it. Resolves once the fake handed it on.
   */
  userSendsInGroup(from: string, text: string): Promise<void>;
  /** Texts the bot posted in that group chat, in order. */
  groupTexts(): string[];
  /** How many files the fake has served to the adapter. */
  downloads(): number;
  /** How many typing or receipt signals (sendChatAction, typing, reactions.add ...) the fake has had. */
  typingSignals(): number;
  /** Whether the chat shows the bot busy right now (an indicator running, a receipt reaction on). */
  typingActive(): boolean;
  /** Texts of every message the bot posted, in any chat, in order. */
  texts(): string[];
  /** Labels of the buttons under the bot's latest message, as the platform shows them now (empty: none). */
  buttons(): string[];
  /**
   * `from` presses the button labelled `label` under the bot's latest message, through the platform's
   * real wire format (Telegram callback_query, Slack block_actions, Discord component interaction).
   * Resolves, once the adapter has acknowledged the press, with what the platform showed the presser
   * alone (callback answer text, ephemeral message).
   */
  press(from: string, label: string): Promise<string>;
  /** The current text of every message the bot posted (after edits), in the order they were posted. */
  currentTexts(): string[];
  /**
   * Every text the chat showed while a reply was streamed, in order: each draft (Telegram
   * sendMessageDraft), each post and each edit of a bot message.
   */
  previews(): string[];
  /** The bot's next edit (or draft update) fails for good: the message was deleted, is too old ... */
  failNextEdit(): void;
  /** The bot's next message post fails: permanently (blocked, chat gone) or transiently (rate limit with retry-after, 5xx). */
  failNextSend(kind: "permanent" | "transient"): void;
  /** Requests the fake answered 429 again because they came before the last 429's retry_after had passed. */
  earlyRetries(): number;
  /** Closes the fake (the suite stops the channel first). */
  close(): Promise<void>;
}

export interface PlatformDriver {
  name: "telegram" | "slack" | "discord";
  /** "repeats": a typing action renewed while the turn runs; "once": a receipt (reaction) shown once. */
  typing: "repeats" | "once";
  /** The longest text one message shows (Telegram 4096, Discord 2000 ...): longer replies continue in another. */
  messageLimit: number;
  create(opts: RigOptions): Promise<PlatformRig>;
}
