/**
 * Files in both directions. Uploads are streamed into the workspace media folder like other
 * channels' downloads (size-limited, 0600, a temp file renamed when complete) and named by an
 * opaque id the message then lists. The page uploads a file when it is attached, before it is
 * sent in a conversation, so uploads wait in media/web/.pending/ (no chat's turn can reach it)
 * and move into the conversation's own media folder when a message takes them. Uploads not yet
 * sent are bounded in total (the quota) and deleted when no message took them within
 * UPLOAD_TTL_MS, or when the channel stops (their ids die with it). Files the agent sends get
 * opaque ids too, so the page can fetch them (GET /api/files/:id) without ever naming a path.
 */
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { createWriteStream, renameSync } from "node:fs";
import { rename, rm, stat } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import { basename, dirname, join } from "node:path";
import { pipeline } from "node:stream/promises";
import { BoundedMap } from "../../util/bounded-map.js";
import { chatMediaDir, MEDIA_DIR } from "../../util/chat-folders.js";
import { mkdirPrivate, mkdirPrivateSync } from "../../util/private-fs.js";
import { mediaFileName, safeFileName } from "../media.js";
import { ChannelError, errorMessage } from "../../util/errors.js";
import { HttpError, tooLarge } from "../../util/http-body.js";
import type { Logger } from "../../log.js";
import type { FileRef, UploadResult } from "./protocol.js";

/** How long an upload may take. */
const UPLOAD_TIMEOUT_MS = 5 * 60_000;
/** An upload not sent with a message within this time is deleted. */
const UPLOAD_TTL_MS = 60 * 60_000;
/** How often uploads past their time are looked for. */
const SWEEP_INTERVAL_MS = 60_000;
/** Uploads kept and not yet sent, whatever their size: a bound on the map, not only on the disk. */
const MAX_UNSENT = 500;

interface StoredFile {
  path: string;
  name: string;
  bytes: number;
}

/** An upload a message lists: the file, and its type as the browser said (what decides a transcription). */
export interface Upload extends StoredFile {
  contentType: string;
}

interface Unsent extends Upload {
  savedAt: number;
}

export interface UploadOptions {
  /** Largest upload (channels.maxMediaBytes). */
  maxBytes: number;
  /** Total size of uploads kept and not yet sent (channels.web.uploadQuotaBytes). */
  quotaBytes: number;
  log: Logger;
  ttlMs?: number;
  now?: () => number;
}

function overQuota(quotaBytes: number): HttpError {
  return new HttpError(
    413,
    `uploads waiting to be sent already take ${quotaBytes} bytes (channels.web.uploadQuotaBytes): ` +
      "send them with a message, or wait an hour for unsent ones to be deleted",
  );
}

function newId(): string {
  return randomBytes(12).toString("base64url");
}

export class Uploads {
  private readonly files = new Map<string, Unsent>();
  /** Bytes of the uploads kept and of those arriving: what the quota bounds. */
  private heldBytes = 0;
  private timer: NodeJS.Timeout | undefined;
  readonly maxBytes: number;

  constructor(
    private readonly workspace: string,
    private readonly opts: UploadOptions,
  ) {
    this.maxBytes = opts.maxBytes;
  }

  /** Starts deleting uploads past their time. */
  start(): void {
    if (this.timer) return;
    const every = Math.min(SWEEP_INTERVAL_MS, this.ttlMs);
    this.timer = setInterval(() => void this.sweep(), every);
    this.timer.unref();
  }

  /** Stops the sweep and deletes every unsent upload: their ids are not known past this channel's life. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.remove([...this.files.keys()]);
  }

  /** Deletes the uploads no message took within their time. */
  sweep(): Promise<void> {
    const now = this.now();
    const expired = [...this.files].filter(([, f]) => now - f.savedAt >= this.ttlMs).map(([id]) => id);
    return this.remove(expired);
  }

  /** Streams the request body into the media folder; 413 past maxBytes or the quota, 408 when too slow. */
  async save(req: IncomingMessage, name: string): Promise<UploadResult> {
    const declared = Number(req.headers["content-length"] ?? NaN);
    if (Number.isFinite(declared) && declared > this.maxBytes) throw tooLarge(this.maxBytes);
    const quota = this.opts.quotaBytes;
    if (Number.isFinite(declared) && this.heldBytes + declared > quota) throw overQuota(quota);
    if (this.files.size >= MAX_UNSENT) {
      throw new HttpError(
        429,
        `${MAX_UNSENT} uploads are waiting to be sent: send them with a message first`,
      );
    }
    const shown = safeFileName(name);
    const path = join(this.workspace, MEDIA_DIR, "web", ".pending", mediaFileName(shown));
    await mkdirPrivate(dirname(path));
    const temp = `${path}.part`;
    const limit = this.maxBytes;
    let bytes = 0;
    const signal = AbortSignal.timeout(UPLOAD_TIMEOUT_MS);
    // Counted as it arrives, so uploads running side by side cannot pass the quota together.
    const hold = (n: number): void => {
      bytes += n;
      this.heldBytes += n;
      if (bytes > limit) throw tooLarge(limit);
      if (this.heldBytes > quota) throw overQuota(quota);
    };
    const file = createWriteStream(temp, { mode: 0o600 });
    try {
      await pipeline(
        req,
        async function* (source: AsyncIterable<Buffer>) {
          for await (const chunk of source) {
            hold(chunk.length);
            yield chunk;
          }
        },
        file,
        { signal },
      );
      await rename(temp, path);
    } catch (err) {
      this.heldBytes -= bytes;
      // Refused on its first bytes, the file may still be opening: removed once it is closed, or
      // the open would create it after the removal and leave it behind.
      if (!file.closed) await once(file, "close").catch(() => undefined);
      await rm(temp, { force: true });
      if (signal.aborted) throw new HttpError(408, "the upload took too long");
      throw err;
    }
    const id = newId();
    const contentType = req.headers["content-type"]?.split(";")[0]?.trim().toLowerCase() ?? "";
    this.files.set(id, { path, name: shown, bytes, contentType, savedAt: this.now() });
    return { id, name: shown, bytes };
  }

  /** The uploads a message lists, still kept here (400 for an unknown or expired id). */
  find(ids: readonly string[]): Upload[] {
    return ids.map((id) => {
      const file = this.files.get(id);
      if (!file) throw new HttpError(400, `upload ${id} is unknown or expired: upload the file again`);
      return file;
    });
  }

  /** The uploads a message lists, once each (400 for an unknown or expired id). */
  take(ids: readonly string[]): { paths: string[]; files: FileRef[] } {
    const found = this.find(ids);
    // Sent: the message owns the files now, and they no longer count against the quota.
    for (const id of ids) this.forget(id);
    return {
      paths: found.map((f) => f.path),
      files: found.map((f) => ({ name: f.name, bytes: f.bytes })),
    };
  }

  /**
   * Moves an upload out of media/web/.pending/ into its conversation's media folder, the only
   * one that conversation's turns can reach, and returns the new path.
   */
  moveToConversation(upload: Upload, conversationId: string): string {
    const folder = chatMediaDir(this.workspace, { channel: "web", chatId: conversationId });
    mkdirPrivateSync(folder);
    const path = join(folder, basename(upload.path));
    try {
      renameSync(upload.path, path);
    } catch (err) {
      throw new ChannelError(
        `the upload ${upload.name} is no longer there (${errorMessage(err)}): upload it again`,
        {
          platform: "web",
          permanent: true,
        },
      );
    }
    return path;
  }

  private async remove(ids: readonly string[]): Promise<void> {
    const paths = ids.flatMap((id) => this.forget(id)?.path ?? []);
    await Promise.all(
      paths.map((path) =>
        rm(path, { force: true }).catch((err: unknown) =>
          this.opts.log.warn({ err, path }, "an unsent upload could not be deleted"),
        ),
      ),
    );
  }

  private forget(id: string): Unsent | undefined {
    const file = this.files.get(id);
    if (!file) return undefined;
    this.files.delete(id);
    this.heldBytes -= file.bytes;
    return file;
  }

  private get ttlMs(): number {
    return this.opts.ttlMs ?? UPLOAD_TTL_MS;
  }

  private now(): number {
    return (this.opts.now ?? Date.now)();
  }
}

/** Files the agent sent, by opaque id. In memory: after a restart the page shows their names only. */
export class AgentFiles {
  private readonly files = new BoundedMap<string, StoredFile>(1000);

  /** An id for a file the agent sent; its size when it can be read. */
  async register(path: string): Promise<FileRef> {
    const bytes = await stat(path).then(
      (s) => s.size,
      () => undefined,
    );
    const id = newId();
    const name = safeFileName(basename(path));
    this.files.set(id, { path, name, bytes: bytes ?? 0 });
    return { id, name, ...(bytes !== undefined ? { bytes } : {}) };
  }

  /** A file another instance registered (relay.ts), under its id: the workspace is shared in a cluster. */
  adopt(ref: FileRef, path: string): void {
    if (ref.id) this.files.set(ref.id, { path, name: safeFileName(ref.name), bytes: ref.bytes ?? 0 });
  }

  get(id: string): StoredFile | undefined {
    return this.files.get(id);
  }
}
