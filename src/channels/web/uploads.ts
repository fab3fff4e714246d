/**
 * Files in both directions. Uploads are streamed into the workspace media folder like other
 * channels' downloads (size-limited, 0600, a temp file renamed when complete) and named by an
 * opaque id the message then lists. The page uploads a file when it is attached, before it is
 * sent in a conversation, so uploads wait in media/web/.pending/ (no chat's turn can reach it)
 * and move into the conversation's own media folder when a message takes them. Files the agent sends get opaque ids too, so the page can
 * fetch them (GET /api/files/:id) without ever naming a path.
 */
import { randomBytes } from "node:crypto";
import { createWriteStream, renameSync } from "node:fs";
import { rename, rm, stat } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import { basename, dirname, join } from "node:path";
import { pipeline } from "node:stream/promises";
import { BoundedMap } from "../../util/bounded-map.js";
import { chatMediaDir, MEDIA_DIR } from "../../util/chat-folders.js";
import { mkdirPrivate, mkdirPrivateSync } from "../../util/private-fs.js";
import { mediaFileName, safeFileName } from "../media.js";
import { errorMessage } from "../../util/errors.js";
import { HttpError, tooLarge } from "../../util/http-body.js";
import type { FileRef, UploadResult } from "./protocol.js";

/** How long an upload may take. */
const UPLOAD_TIMEOUT_MS = 5 * 60_000;
/** An upload not sent with a message within this time is forgotten (the file stays in media/). */
const UPLOAD_TTL_MS = 60 * 60_000;

interface StoredFile {
  path: string;
  name: string;
  bytes: number;
}

function newId(): string {
  return randomBytes(12).toString("base64url");
}

export class Uploads {
  private readonly files = new BoundedMap<string, StoredFile>(500, UPLOAD_TTL_MS);

  constructor(
    private readonly workspace: string,
    readonly maxBytes: number,
  ) {}

  /** Streams the request body into the media folder; 413 past maxBytes, 408 when too slow. */
  async save(req: IncomingMessage, name: string): Promise<UploadResult> {
    const declared = Number(req.headers["content-length"] ?? NaN);
    if (Number.isFinite(declared) && declared > this.maxBytes) throw tooLarge(this.maxBytes);
    const shown = safeFileName(name);
    const path = join(this.workspace, MEDIA_DIR, "web", ".pending", mediaFileName(shown));
    await mkdirPrivate(dirname(path));
    const temp = `${path}.part`;
    const limit = this.maxBytes;
    let bytes = 0;
    const signal = AbortSignal.timeout(UPLOAD_TIMEOUT_MS);
    try {
      await pipeline(
        req,
        async function* (source: AsyncIterable<Buffer>) {
          for await (const chunk of source) {
            bytes += chunk.length;
            if (bytes > limit) throw tooLarge(limit);
            yield chunk;
          }
        },
        createWriteStream(temp, { mode: 0o600 }),
        { signal },
      );
      await rename(temp, path);
    } catch (err) {
      await rm(temp, { force: true });
      if (signal.aborted) throw new HttpError(408, "the upload took too long");
      throw err;
    }
    const id = newId();
    this.files.set(id, { path, name: shown, bytes });
    return { id, name: shown, bytes };
  }

  /**
   * The uploads a message lists, once each (400 for an unknown or expired id), moved into the
   * conversation's media folder. Synchronous renames within media/: the message is published
   * in the same tick, in its order.
   */
  take(ids: readonly string[], conversationId: string): { paths: string[]; files: FileRef[] } {
    const found = ids.map((id) => {
      const file = this.files.get(id);
      if (!file) throw new HttpError(400, `upload ${id} is unknown or expired: upload the file again`);
      return file;
    });
    for (const id of ids) this.files.delete(id);
    const folder = chatMediaDir(this.workspace, { channel: "web", chatId: conversationId });
    if (found.length) mkdirPrivateSync(folder);
    const paths = found.map((f) => {
      const path = join(folder, basename(f.path));
      try {
        renameSync(f.path, path);
      } catch (err) {
        throw new HttpError(
          400,
          `upload ${f.name} is no longer there (${errorMessage(err)}): upload it again`,
        );
      }
      return path;
    });
    return {
      paths,
      files: found.map((f) => ({ name: f.name, bytes: f.bytes })),
    };
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
    const name = basename(path);
    this.files.set(id, { path, name, bytes: bytes ?? 0 });
    return { id, name, ...(bytes !== undefined ? { bytes } : {}) };
  }

  get(id: string): StoredFile | undefined {
    return this.files.get(id);
  }
}
