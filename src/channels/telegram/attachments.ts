/**
 * Files offered with Telegram messages, as the shared inbound path's
 * IncomingFiles (label, size when Telegram says it, a fetch that downloads
 * on demand), and albums: one message per item on the wire, gathered into
 * one message for the agent.
 */
import { chmod, copyFile, stat } from "node:fs/promises";
import { dirname, isAbsolute } from "node:path";
import type { Bot } from "grammy";
import type { ChatRef } from "../../util/chat-folders.js";
import { ChannelError } from "../../util/errors.js";
import { mkdirPrivate, PRIVATE_FILE_MODE } from "../../util/private-fs.js";
import type { CompleteMessage, IncomingFile } from "../inbound.js";
import { downloadFile, mediaPath, MediaTooLargeError } from "../media.js";
import { gs } from "./api.js";
import { isFileTooBig } from "./errors.js";
import { mergeAlbum, type Attachment, type MappedMessage } from "./mapping.js";

/** The cloud Bot API refuses getFile over this (a self-hosted server does not). */
const CLOUD_DOWNLOAD_LIMIT = 20 * 1024 * 1024;
const ALBUM_MAX_PARTS = 10;

const FILE_KIND: Record<Attachment["kind"], { kind: IncomingFile["kind"]; label: string }> = {
  photo: { kind: "image", label: "photo" },
  document: { kind: "file", label: "file" },
  voice: { kind: "voice", label: "voice message" },
  audio: { kind: "audio", label: "audio file" },
  video: { kind: "video", label: "video" },
  video_note: { kind: "video", label: "video message" },
  animation: { kind: "video", label: "animation" },
};

export interface DownloadContext {
  bot: Bot;
  apiRoot: string;
  token: string;
  workspace: string;
  maxMediaBytes: number;
}

/** The message's attachments as files the inbound path fetches only once the sender is let in. */
export function incomingFiles(attachments: readonly Attachment[], ctx: DownloadContext): IncomingFile[] {
  return attachments.map((att) => ({
    ...FILE_KIND[att.kind],
    name: att.fileName,
    ...(att.sizeBytes !== undefined ? { sizeBytes: att.sizeBytes } : {}),
    fetch: (signal, chat) => download(att, ctx, chat, signal),
  }));
}

async function download(
  att: Attachment,
  ctx: DownloadContext,
  chat: ChatRef,
  signal: AbortSignal,
): Promise<string> {
  const max = ctx.maxMediaBytes;
  let file;
  try {
    file = await ctx.bot.api.getFile(att.fileId, gs(signal));
  } catch (err) {
    if (isFileTooBig(err)) throw new MediaTooLargeError(att.sizeBytes, Math.min(max, CLOUD_DOWNLOAD_LIMIT));
    throw err;
  }
  if (!file.file_path) throw new ChannelError("Telegram returned no file path for this file");
  const dest = mediaPath(ctx.workspace, chat, att.fileName);
  if (isAbsolute(file.file_path)) {
    // A self-hosted Bot API server in --local mode hands out paths on its own disk.
    const size = (await stat(file.file_path)).size;
    if (size > max) throw new MediaTooLargeError(size, max);
    await mkdirPrivate(dirname(dest));
    await copyFile(file.file_path, dest);
    await chmod(dest, PRIVATE_FILE_MODE);
    return dest;
  }
  return downloadFile({
    url: `${ctx.apiRoot}/file/bot${ctx.token}/${file.file_path}`,
    dest,
    maxBytes: max,
    signal,
    ...(file.file_size !== undefined ? { expectedBytes: file.file_size } : {}),
  });
}

interface Album {
  /** Every part, and whether the group policy lets it through on its own. */
  parts: { mapped: MappedMessage; accepted: boolean }[];
  timer: NodeJS.Timeout | undefined;
  finish: () => void;
  /** The whole album, or null when no part is for the bot. */
  complete: Promise<CompleteMessage | null>;
}

/**
 * Gathers album parts: the first part of an album gets the promise of the whole album (for the
 * inbound path's `completes`); later parts join it. Only one part carries the caption (and so the
 * @mention), so the album is for the bot when any of its parts is; otherwise it resolves to null.
 */
export class AlbumCollector {
  private readonly albums = new Map<string, Album>();

  constructor(
    private readonly delayMs: number,
    private readonly filesOf: (attachments: readonly Attachment[]) => IncomingFile[],
  ) {}

  /** Adds a part; returns the album's completion for its first part, undefined for the others. */
  add(
    mapped: MappedMessage,
    accepted: boolean,
    groupId: string,
  ): Promise<CompleteMessage | null> | undefined {
    const key = `${mapped.inbound.chatId}:${groupId}`;
    const existing = this.albums.get(key);
    const album = existing ?? this.open(key);
    album.parts.push({ mapped, accepted });
    clearTimeout(album.timer);
    if (album.parts.length >= ALBUM_MAX_PARTS) album.finish();
    else album.timer = setTimeout(album.finish, this.delayMs);
    return existing ? undefined : album.complete;
  }

  /** At stop: every album completes now with the parts it has (the inbound path leaves them reserved). */
  flush(): void {
    for (const album of [...this.albums.values()]) album.finish();
  }

  private open(key: string): Album {
    let finish!: () => void;
    const complete = new Promise<CompleteMessage | null>((resolve) => {
      finish = () => {
        const album = this.albums.get(key);
        if (!album) return;
        clearTimeout(album.timer);
        this.albums.delete(key);
        if (!album.parts.some((p) => p.accepted)) return resolve(null);
        const merged = mergeAlbum(album.parts.map((p) => p.mapped));
        resolve({ inbound: merged.inbound, files: this.filesOf(merged.attachments) });
      };
    });
    const album: Album = { parts: [], timer: undefined, finish, complete };
    this.albums.set(key, album);
    return album;
  }
}
