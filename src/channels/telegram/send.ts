/**
 * Outbound: a reply becomes Telegram messages (formatted, chunked, files by
 * type, a short reply as the first file's caption), all through one send
 * point, `post`; a question carries an inline keyboard under its last chunk,
 * and an edit rewrites it without buttons (editMessageText, same errors). It retries in another form where Telegram says how (plain
 * text when the HTML is refused, the General topic when the thread is gone,
 * the new chat of an upgraded group) and turns every other failure into a
 * ChannelError that says whether a retry can ever succeed.
 */
import { stat } from "node:fs/promises";
import { basename, extname } from "node:path";
import { InputFile, type Api } from "grammy";
import type { InlineKeyboardMarkup } from "grammy/types";
import type { OutboundMessage, Question } from "../../bus/types.js";
import type { Logger } from "../../log.js";
import { ChannelError, errorMessage } from "../../util/errors.js";
import { chatIdParam } from "./api.js";
import {
  isBadRequest,
  isDraftRefused,
  isNotModified,
  isParseError,
  isThreadGone,
  migratedTo,
  sendFailure,
} from "./errors.js";
import { formatForTelegram, splitPlain, TELEGRAM_MAX_CAPTION, type TelegramChunk } from "./format.js";
import { CHANNEL, type ReplyTarget } from "./mapping.js";
import { inlineKeyboard, NO_BUTTONS } from "./questions.js";
import { choicesAsText } from "../questions.js";

type MediaMethod = "sendPhoto" | "sendVoice" | "sendAudio" | "sendVideo" | "sendAnimation" | "sendDocument";

const MEDIA_BY_EXT: Record<string, MediaMethod> = {
  ".jpg": "sendPhoto",
  ".jpeg": "sendPhoto",
  ".png": "sendPhoto",
  ".webp": "sendPhoto",
  ".ogg": "sendVoice",
  ".oga": "sendVoice",
  ".opus": "sendVoice",
  ".mp3": "sendAudio",
  ".m4a": "sendAudio",
  ".wav": "sendAudio",
  ".flac": "sendAudio",
  ".aac": "sendAudio",
  ".mp4": "sendVideo",
  ".mov": "sendVideo",
  ".gif": "sendAnimation",
};

const MEDIA_FIELD: Record<MediaMethod, string> = {
  sendPhoto: "photo",
  sendVoice: "voice",
  sendAudio: "audio",
  sendVideo: "video",
  sendAnimation: "animation",
  sendDocument: "document",
};

export interface TextOptions {
  /** No HTML: progress, tool hints and notices are sent as they are. */
  plainOnly?: boolean;
  silent?: boolean;
  /** Buttons under the message (a question's). */
  markup?: InlineKeyboardMarkup;
}

export class TelegramSender {
  constructor(
    private readonly api: Api,
    private readonly apiRoot: string,
    private readonly log: Logger,
  ) {}

  /** A final reply: formatted chunks and files; only the first message quotes the user's. */
  async reply(target: ReplyTarget, msg: OutboundMessage): Promise<void> {
    const chunks = formatForTelegram(msg.content);
    const nextTarget = quoteOnce(target);
    const { found: media, missing } = await existingFiles(msg.media ?? []);
    // A short reply with files rides along as the first file's caption.
    const captioned =
      media.length > 0 && chunks.length === 1 && chunks[0]!.html.length <= TELEGRAM_MAX_CAPTION;
    if (!captioned) for (const chunk of chunks) await this.text(nextTarget(), chunk);
    for (const [i, path] of media.entries()) {
      await this.file(nextTarget(), path, captioned && i === 0 ? chunks[0] : undefined);
    }
    for (const path of missing) {
      this.log.warn({ path }, "cannot send a file that does not exist");
      await this.notice(nextTarget(), `(I couldn't send ${basename(path)}: the file is missing.)`);
    }
  }

  /**
   * A question: formatted like a reply, its choices as an inline keyboard under the last chunk (a
   * long text is split, and the buttons belong under its end). Returns that message's id, which an
   * edit names.
   */
  async question(target: ReplyTarget, content: string, question: Question): Promise<number> {
    const found = formatForTelegram(content);
    // Telegram refuses an empty text, and buttons need a message to hang under.
    const chunks = found.length > 0 ? found : [plainChunk(choicesAsText(question))];
    const nextTarget = quoteOnce(target);
    let last: number | undefined;
    for (const [i, chunk] of chunks.entries()) {
      const markup = i === chunks.length - 1 ? inlineKeyboard(question) : undefined;
      last = await this.text(nextTarget(), chunk, markup ? { markup } : {});
    }
    // Every chunk has text (formatForTelegram drops blank ones), so the last send gave an id.
    if (last === undefined) throw new Error("a question was sent without a message to carry its buttons");
    return last;
  }

  /**
   * Rewrites a question's message to `content` and takes its buttons away. "Not modified" (the same
   * text, buttons already gone) is success; a message that is gone or too old to edit is Telegram's
   * 400, a permanent ChannelError. A text too long for one message goes on in new messages.
   */
  async edit(target: ReplyTarget, messageId: number, content: string): Promise<void> {
    const [first, ...rest] = formatForTelegram(content);
    await this.rewrite(target, messageId, first ?? plainChunk("(answered)"), { markup: NO_BUTTONS });
    const { replyTo: _noQuote, ...where } = target;
    for (const more of rest) await this.text(where, more);
  }

  /**
   * Rewrites one message to `chunk` (editMessageText): as HTML, or plain when Telegram cannot parse
   * it or `plainOnly` says so. "Not modified" is success; anything else is a ChannelError.
   */
  async rewrite(
    target: ReplyTarget,
    messageId: number,
    chunk: TelegramChunk,
    opts: TextOptions = {},
  ): Promise<void> {
    const chatId = chatIdParam(target.chatId);
    const editTo = (text: string, html: boolean) =>
      this.api.editMessageText(chatId, messageId, text, {
        ...(html ? { parse_mode: "HTML" as const } : {}),
        ...(opts.markup ? { reply_markup: opts.markup } : {}),
      });
    try {
      if (opts.plainOnly) await editTo(chunk.plain, false);
      else {
        try {
          await editTo(chunk.html, true);
        } catch (err) {
          if (!isParseError(err)) throw err;
          this.log.warn(
            { err: errorMessage(err) },
            "Telegram refused the formatted edit; editing to plain text",
          );
          await editTo(chunk.plain, false);
        }
      }
    } catch (err) {
      if (!isNotModified(err)) throw sendFailure(err, "editMessageText", target.chatId, this.apiRoot);
    }
  }

  /**
   * Shows `text` (plain) as the draft `draftId` of a private chat (sendMessageDraft): an ephemeral
   * preview that Telegram animates while the answer is written and drops when a message comes.
   * False when Telegram does not offer drafts there (an older Bot API, a chat that cannot have
   * them); any other failure is a ChannelError.
   */
  async draft(target: ReplyTarget, draftId: number, text: string): Promise<boolean> {
    const chatId = chatIdParam(target.chatId);
    if (typeof chatId !== "number") return false; // drafts go to a user, never to an @channel
    try {
      await this.api.sendMessageDraft(chatId, draftId, text, {
        ...(target.threadId !== undefined ? { message_thread_id: target.threadId } : {}),
      });
      return true;
    } catch (err) {
      if (isDraftRefused(err)) return false;
      throw sendFailure(err, "sendMessageDraft", target.chatId, this.apiRoot);
    }
  }

  /** One message of a chunk: HTML (plain when refused), or plain with `plainOnly`. Returns its id. */
  async message(target: ReplyTarget, chunk: TelegramChunk, opts: TextOptions = {}): Promise<number> {
    const id = await this.text(target, chunk, opts);
    if (id === undefined) {
      throw new ChannelError("a blank text cannot be sent to Telegram", {
        platform: CHANNEL,
        method: "sendMessage",
        permanent: true,
      });
    }
    return id;
  }

  /** Progress and tool hints: small, plain, silent, unquoted. */
  async aside(target: ReplyTarget, content: string): Promise<void> {
    const { replyTo: _noQuote, ...where } = target;
    for (const text of splitPlain(content))
      await this.text(where, { html: text, plain: text }, { plainOnly: true, silent: true });
  }

  /** A plain message of our own (a greeting, "too large"). */
  async notice(target: ReplyTarget, text: string): Promise<void> {
    await this.text(target, plainChunk(text), { plainOnly: true });
  }

  /**
   * Sends one chunk as HTML, falling back to plain text when Telegram cannot parse it. Returns the
   * message's id (undefined for a blank chunk, which is not sent).
   */
  private async text(
    target: ReplyTarget,
    chunk: TelegramChunk,
    opts: TextOptions = {},
  ): Promise<number | undefined> {
    if (!chunk.plain.trim()) return undefined;
    return this.post(target, "sendMessage", async (t) => {
      const base = {
        ...replyOptions(t, opts.silent),
        ...(opts.markup ? { reply_markup: opts.markup } : {}),
      };
      const chatId = chatIdParam(t.chatId);
      if (opts.plainOnly) return (await this.api.sendMessage(chatId, chunk.plain, base)).message_id;
      try {
        return (await this.api.sendMessage(chatId, chunk.html, { ...base, parse_mode: "HTML" })).message_id;
      } catch (err) {
        if (!isParseError(err)) throw err;
        this.log.warn(
          { err: errorMessage(err) },
          "Telegram refused the formatted reply; sending it as plain text",
        );
        return (await this.api.sendMessage(chatId, chunk.plain, base)).message_id;
      }
    });
  }

  private async file(target: ReplyTarget, path: string, caption: TelegramChunk | undefined): Promise<void> {
    const method: MediaMethod = MEDIA_BY_EXT[extname(path).toLowerCase()] ?? "sendDocument";
    await this.post(target, method, async (t) => {
      const send = async (m: MediaMethod, withCaption: "html" | "plain") => {
        const payload: Record<string, unknown> = {
          chat_id: chatIdParam(t.chatId),
          [MEDIA_FIELD[m]]: new InputFile(path, basename(path)),
          ...replyOptions(t),
          ...(caption && withCaption === "html" ? { caption: caption.html, parse_mode: "HTML" } : {}),
          ...(caption && withCaption === "plain"
            ? { caption: caption.plain.slice(0, TELEGRAM_MAX_CAPTION) }
            : {}),
        };
        // The method is picked at run time; the raw API takes its payload as-is.
        await (this.api.raw[m] as (p: Record<string, unknown>) => Promise<unknown>)(payload);
      };
      try {
        await send(method, "html");
      } catch (err) {
        if (isParseError(err)) await send(method, "plain");
        // Photos have size and dimension limits documents do not.
        else if (method !== "sendDocument" && isBadRequest(err)) await send("sendDocument", "html");
        else throw err;
      }
    });
  }

  /**
   * The single send point. Retries in the General topic when the forum topic is gone, and in the new
   * chat when a group was upgraded; any other failure leaves as a ChannelError (permanent or not).
   */
  private async post<T>(
    target: ReplyTarget,
    method: string,
    send: (t: ReplyTarget) => Promise<T>,
  ): Promise<T> {
    try {
      try {
        return await send(target);
      } catch (err) {
        const migrated = migratedTo(err);
        if (isThreadGone(err) && target.threadId !== undefined) {
          const { threadId: _gone, ...rest } = target;
          return await send(rest);
        } else if (migrated !== undefined) {
          this.log.warn(
            { from: target.chatId, to: migrated },
            "the group became a supergroup; sending there",
          );
          return await send({ ...target, chatId: String(migrated) });
        } else throw err;
      }
    } catch (err) {
      throw sendFailure(err, method, target.chatId, this.apiRoot);
    }
  }
}

function plainChunk(text: string): TelegramChunk {
  return { html: text, plain: text };
}

/** Targets for a run of messages where only the first quotes the user's message. */
function quoteOnce(target: ReplyTarget): () => ReplyTarget {
  const { replyTo: firstQuote, ...where } = target;
  let quote = firstQuote;
  return () => {
    const t = quote !== undefined ? { ...where, replyTo: quote } : where;
    quote = undefined;
    return t;
  };
}

function replyOptions(target: ReplyTarget, silent = false) {
  return {
    ...(target.threadId !== undefined ? { message_thread_id: target.threadId } : {}),
    ...(target.replyTo !== undefined
      ? { reply_parameters: { message_id: target.replyTo, allow_sending_without_reply: true } }
      : {}),
    ...(silent ? { disable_notification: true } : {}),
  };
}

async function existingFiles(paths: readonly string[]): Promise<{ found: string[]; missing: string[] }> {
  const found: string[] = [];
  const missing: string[] = [];
  for (const path of paths) {
    const isFile = await stat(path).then(
      (st) => st.isFile(),
      () => false,
    );
    (isFile ? found : missing).push(path);
  }
  return { found, missing };
}
