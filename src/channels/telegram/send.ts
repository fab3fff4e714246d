/**
 * Outbound: a reply becomes Telegram messages (formatted, chunked, files by
 * type, a short reply as the first file's caption), all through one send
 * point, `post`. It retries in another form where Telegram says how (plain
 * text when the HTML is refused, the General topic when the thread is gone,
 * the new chat of an upgraded group) and turns every other failure into a
 * ChannelError that says whether a retry can ever succeed.
 */
import { stat } from "node:fs/promises";
import { basename, extname } from "node:path";
import { InputFile, type Bot } from "grammy";
import type { OutboundMessage } from "../../bus/types.js";
import type { Logger } from "../../log.js";
import { errorMessage } from "../../util/errors.js";
import { chatIdParam } from "./api.js";
import { isBadRequest, isParseError, isThreadGone, migratedTo, sendFailure } from "./errors.js";
import { formatForTelegram, splitPlain, TELEGRAM_MAX_CAPTION, type TelegramChunk } from "./format.js";
import type { ReplyTarget } from "./mapping.js";

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
}

export class TelegramSender {
  constructor(
    private readonly bot: Bot,
    private readonly apiRoot: string,
    private readonly log: Logger,
  ) {}

  /** A final reply: formatted chunks and files; only the first message quotes the user's. */
  async reply(target: ReplyTarget, msg: OutboundMessage): Promise<void> {
    const chunks = formatForTelegram(msg.content);
    const { replyTo: firstQuote, ...where } = target;
    let quote = firstQuote;
    const nextTarget = (): ReplyTarget => {
      const t = quote !== undefined ? { ...where, replyTo: quote } : where;
      quote = undefined;
      return t;
    };
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

  /** Progress and tool hints: small, plain, silent, unquoted. */
  async aside(target: ReplyTarget, content: string): Promise<void> {
    const { replyTo: _noQuote, ...where } = target;
    for (const text of splitPlain(content))
      await this.text(where, { html: text, plain: text }, { plainOnly: true, silent: true });
  }

  /** A plain message of our own (a greeting, "too large"). */
  notice(target: ReplyTarget, text: string): Promise<void> {
    return this.text(target, { html: text, plain: text }, { plainOnly: true });
  }

  /** Sends one chunk as HTML, falling back to plain text when Telegram cannot parse it. */
  private async text(target: ReplyTarget, chunk: TelegramChunk, opts: TextOptions = {}): Promise<void> {
    if (!chunk.plain.trim()) return;
    await this.post(target, "sendMessage", async (t) => {
      const base = replyOptions(t, opts.silent);
      if (opts.plainOnly) {
        await this.bot.api.sendMessage(chatIdParam(t.chatId), chunk.plain, base);
        return;
      }
      try {
        await this.bot.api.sendMessage(chatIdParam(t.chatId), chunk.html, { ...base, parse_mode: "HTML" });
      } catch (err) {
        if (!isParseError(err)) throw err;
        this.log.warn(
          { err: errorMessage(err) },
          "Telegram refused the formatted reply; sending it as plain text",
        );
        await this.bot.api.sendMessage(chatIdParam(t.chatId), chunk.plain, base);
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
        await (this.bot.api.raw[m] as (p: Record<string, unknown>) => Promise<unknown>)(payload);
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
  private async post(
    target: ReplyTarget,
    method: string,
    send: (t: ReplyTarget) => Promise<void>,
  ): Promise<void> {
    try {
      try {
        await send(target);
      } catch (err) {
        const migrated = migratedTo(err);
        if (isThreadGone(err) && target.threadId !== undefined) {
          const { threadId: _gone, ...rest } = target;
          await send(rest);
        } else if (migrated !== undefined) {
          this.log.warn(
            { from: target.chatId, to: migrated },
            "the group became a supergroup; sending there",
          );
          await send({ ...target, chatId: String(migrated) });
        } else throw err;
      }
    } catch (err) {
      throw sendFailure(err, method, target.chatId, this.apiRoot);
    }
  }
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
