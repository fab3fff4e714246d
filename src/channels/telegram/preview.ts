/**
 * A streamed reply on Telegram, as the PreviewSurface that channels/live-preview.ts drives.
 *
 * Private chats show the text as a draft (sendMessageDraft, Bot API 9.3+): an ephemeral preview
 * that Telegram animates and drops when a message arrives, so the final is always a new message
 * (sendMessage), and a part frozen at the length limit is kept by sending it when the next part
 * starts. Groups, topics and private chats that refuse drafts get a message (sendMessage) that is
 * edited (editMessageText) and finally rewritten in place with the formatted HTML.
 *
 * Refs: "d:<draft id>" for a draft, the message id for a message. A draft that became a message
 * keeps its ref; the message id it became is remembered here.
 *
 * Preview texts are the raw model text, sent plain (never a parse error mid-stream); only texts
 * from `finalParts` are HTML, each sent the way a normal reply sends it (send.ts).
 */
import type { Logger } from "../../log.js";
import { BoundedMap } from "../../util/bounded-map.js";
import type { PreviewSurface } from "../types.js";
import { formatForTelegram, TELEGRAM_MAX_TEXT, type TelegramChunk } from "./format.js";
import type { ReplyTarget } from "./mapping.js";
import type { TelegramSender } from "./send.js";

/** Telegram allows about one edit a second per message before it answers 429. */
const PREVIEW_INTERVAL_MS = 1000;

const DRAFT_PREFIX = "d:";

/** Whether a chat is a private one, where drafts can be shown (group and channel ids are negative). */
export function isPrivateChat(chatId: string, metadata?: Record<string, unknown>): boolean {
  const type = metadata?.chatType;
  if (typeof type === "string") return type === "private";
  return /^\d+$/.test(chatId);
}

/** The chats where Telegram refused drafts: previews there are messages from then on. */
export class DraftSupport {
  private readonly refused = new BoundedMap<string, true>(10_000);
  private told = false;
  private nextId = 1;

  constructor(private readonly log: Logger) {}

  allowed(chatId: string): boolean {
    return !this.refused.has(chatId);
  }

  refuse(chatId: string): void {
    if (this.refused.has(chatId)) return;
    this.refused.set(chatId, true);
    const what = "Telegram refused a draft (sendMessageDraft); previews there are edited messages instead";
    if (this.told) this.log.debug({ chatId }, what);
    else this.log.info({ chatId }, `${what} (an older Bot API, or drafts are off for this bot)`);
    this.told = true;
  }

  /** A fresh draft id (Telegram wants a non-zero integer). */
  newId(): number {
    const id = this.nextId;
    this.nextId = id >= 2 ** 31 - 1 ? 1 : id + 1;
    return id;
  }
}

export interface TelegramPreviewOptions {
  sender: TelegramSender;
  /** Where the reply goes; its `replyTo`, if any, is quoted by the first message only. */
  target: ReplyTarget;
  /** Undefined: this chat shows no drafts (a group, a topic, or refused before). */
  drafts: DraftSupport | undefined;
  /** The first text is about to show (the typing indicator ends for this turn). */
  onFirstText(): Promise<void>;
}

interface Draft {
  id: number;
  /** The text it shows now, sent as a message if it must stay. */
  text: string;
}

export class TelegramPreview implements PreviewSurface {
  readonly maxChars = TELEGRAM_MAX_TEXT;
  readonly intervalMs = PREVIEW_INTERVAL_MS;
  /** Drafts not yet turned into messages (at most the last part). */
  private readonly drafts = new Map<string, Draft>();
  /** Draft ref → the message it became. */
  private readonly messages = new Map<string, number>();
  /** The formatted parts of the final, HTML → its plain text, for the plain fallback. */
  private readonly plainOf = new Map<string, string>();
  private useDrafts: boolean;
  private started = false;
  private quoted = false;

  constructor(private readonly opts: TelegramPreviewOptions) {
    this.useDrafts = opts.drafts !== undefined;
  }

  finalParts(content: string): string[] {
    const chunks = formatForTelegram(content);
    for (const c of chunks) this.plainOf.set(c.html, c.plain);
    return chunks.map((c) => c.html);
  }

  async post(text: string, formatted: boolean): Promise<string> {
    if (!this.started) {
      this.started = true;
      await this.opts.onFirstText();
    }
    // The part before was frozen at the length limit: a draft would vanish, so it becomes a message.
    await this.keepDrafts();
    if (!formatted && this.useDrafts) {
      const id = this.opts.drafts!.newId();
      if (await this.draft(id, text)) {
        const ref = `${DRAFT_PREFIX}${id}`;
        this.drafts.set(ref, { id, text });
        return ref;
      }
    }
    return String(await this.send(text, formatted));
  }

  async edit(ref: string, text: string, formatted: boolean): Promise<void> {
    const draft = this.drafts.get(ref);
    if (!draft) {
      await this.opts.sender.rewrite(this.opts.target, this.messageId(ref), this.chunk(text, formatted), {
        plainOnly: !formatted,
      });
      return;
    }
    if (!formatted && this.useDrafts && (await this.draft(draft.id, text))) {
      draft.text = text;
      return;
    }
    // The final (or drafts refused now): the draft goes away, a message takes its place.
    await this.becomeMessage(ref, text, formatted);
  }

  /** /stop: a draft would vanish, so the stopped text is sent; a message is edited. */
  async stopped(ref: string, text: string): Promise<void> {
    if (this.drafts.has(ref)) await this.becomeMessage(ref, text, false);
    else await this.edit(ref, text, false);
  }

  /** Sends a draft; false (and no drafts from now on in this chat) when Telegram refuses them. */
  private async draft(id: number, text: string): Promise<boolean> {
    if (await this.opts.sender.draft(this.opts.target, id, text)) return true;
    this.useDrafts = false;
    this.opts.drafts?.refuse(this.opts.target.chatId);
    return false;
  }

  private async keepDrafts(): Promise<void> {
    for (const [ref, draft] of [...this.drafts]) await this.becomeMessage(ref, draft.text, false);
  }

  private async becomeMessage(ref: string, text: string, formatted: boolean): Promise<void> {
    const id = await this.send(text, formatted);
    this.drafts.delete(ref);
    this.messages.set(ref, id);
  }

  /** A new message; only the first one quotes the user's message, as a normal reply does. */
  private async send(text: string, formatted: boolean): Promise<number> {
    const { replyTo, ...where } = this.opts.target;
    const target = this.quoted || replyTo === undefined ? where : { ...where, replyTo };
    const id = await this.opts.sender.message(target, this.chunk(text, formatted), { plainOnly: !formatted });
    this.quoted = true;
    return id;
  }

  private chunk(text: string, formatted: boolean): TelegramChunk {
    return { html: text, plain: formatted ? (this.plainOf.get(text) ?? text) : text };
  }

  private messageId(ref: string): number {
    return this.messages.get(ref) ?? Number(ref);
  }
}
