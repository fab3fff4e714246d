/**
 * Attachments from chats: downloaded into the workspace media folder with
 * safe names and a size limit, so the model can read them with its tools.
 */
import { randomBytes } from "node:crypto";
import { open, rename, rm } from "node:fs/promises";
import { mkdirPrivate } from "../util/private-fs.js";
import { extname, join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import { chatMediaDir, type ChatRef } from "../util/chat-folders.js";
import { ChannelError } from "../util/errors.js";
import { isFileSystemError, writeFailure } from "../util/write-errors.js";

const MAX_NAME = 80;
const DEFAULT_TIMEOUT_MS = 60_000;

export class MediaTooLargeError extends ChannelError {
  constructor(
    readonly sizeBytes: number | undefined,
    readonly limitBytes: number,
  ) {
    super(`the file is larger than the ${formatBytes(limitBytes)} limit`);
  }
}

/**
 * A file name with no path, no control or shell-special characters, no invisible format characters,
 * bounded length, extension kept. Format characters (Unicode category Cf: the bidirectional
 * overrides and isolates, the direction marks, zero-width characters) change how a name is shown
 * without showing themselves: `a\u202Egnp.exe` reads as "aexe.png".
 */
export function safeFileName(name: string, fallback = "file"): string {
  const base = name.split(/[/\\]/).pop() ?? "";
  const cleaned = base
    .normalize("NFKC")
    // eslint-disable-next-line no-control-regex -- removing control characters is the point
    .replace(/[\u0000-\u001f\u007f<>:"|?*`$;&'!]/g, "")
    .replace(/\p{Cf}/gu, "")
    .replace(/\s+/g, "_")
    .replace(/^\.+/, "");
  if (!cleaned) return fallback;
  if (cleaned.length <= MAX_NAME) return cleaned;
  const ext = extname(cleaned).slice(0, 16);
  return cleaned.slice(0, MAX_NAME - ext.length) + ext;
}

/**
 * workspace/media/<channel>/<chat>/<date>-<random>-<name>: unique, sortable, and in the folder of
 * the one chat it came from, the only media folder that chat's turns can reach (util/chat-folders.ts).
 */
export function mediaPath(workspace: string, chat: ChatRef, fileName: string, now = new Date()): string {
  return join(chatMediaDir(workspace, chat), mediaFileName(fileName, now));
}

/** <date>-<random>-<name>: unique and sortable within a folder. */
export function mediaFileName(fileName: string, now = new Date()): string {
  const day = now.toISOString().slice(0, 10).replace(/-/g, "");
  return `${day}-${randomBytes(4).toString("hex")}-${safeFileName(fileName)}`;
}

export function formatBytes(n: number): string {
  if (n >= 1024 * 1024) return `${(n / (1024 * 1024)).toFixed(n % (1024 * 1024) === 0 ? 0 : 1)} MB`;
  if (n >= 1024) return `${Math.round(n / 1024)} KB`;
  return `${n} bytes`;
}

export interface DownloadOptions {
  url: string;
  /** Where the file goes (see mediaPath). */
  dest: string;
  maxBytes: number;
  headers?: Record<string, string>;
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Declared size, when the platform tells it before downloading (checked first). */
  expectedBytes?: number;
}

/**
 * Streams `url` into `dest`, refusing files over maxBytes (by declared size,
 * Content-Length and bytes actually received). Writes to a temp file and
 * renames, so a failed download leaves nothing behind. Returns `dest`.
 */
export async function downloadFile(opts: DownloadOptions): Promise<string> {
  if (opts.expectedBytes !== undefined && opts.expectedBytes > opts.maxBytes) {
    throw new MediaTooLargeError(opts.expectedBytes, opts.maxBytes);
  }
  const timeout = AbortSignal.timeout(opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
  const response = await fetch(opts.url, { headers: opts.headers, signal, redirect: "follow" });
  if (!response.ok || !response.body) {
    throw new ChannelError(`download failed: HTTP ${response.status}`);
  }
  const declared = Number(response.headers.get("content-length") ?? NaN);
  if (Number.isFinite(declared) && declared > opts.maxBytes) {
    await response.body.cancel();
    throw new MediaTooLargeError(declared, opts.maxBytes);
  }
  await mkdirPrivate(join(opts.dest, ".."));
  const temp = `${opts.dest}.part`;
  let received = 0;
  const limit = opts.maxBytes;
  try {
    // Opened before the pipeline starts: a write stream opening lazily could create the file after
    // a failure's rm below, leaving a stray .part behind.
    const file = await open(temp, "w", 0o600);
    await pipeline(
      Readable.fromWeb(response.body as WebReadableStream<Uint8Array>),
      async function* (source: AsyncIterable<Buffer>) {
        for await (const chunk of source) {
          received += chunk.length;
          if (received > limit) throw new MediaTooLargeError(undefined, limit);
          yield chunk;
        }
      },
      file.createWriteStream(),
    );
    await rename(temp, opts.dest);
    return opts.dest;
  } catch (err) {
    await rm(temp, { force: true });
    // A full or read-only disk: say which file and what to do (the rest keeps its own words).
    if (isFileSystemError(err)) throw writeFailure("the media file", opts.dest, err);
    throw err;
  }
}
