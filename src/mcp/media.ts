/**
 * Images, audio and binary resources returned by MCP tools are saved into the
 * media folder of the chat whose turn called the tool (the only media folder
 * its turns can reach, util/chat-folders.ts), so the model can refer to them
 * (and send them with the `message` tool) instead of receiving base64 it cannot use.
 */
import { join, relative } from "node:path";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { base64Bytes } from "./convert.js";
import { mkdirPrivate, writeFilePrivate } from "../util/private-fs.js";

/** Bigger blobs are described but not written. */
export const MAX_MEDIA_BYTES = 20 * 1024 * 1024;

const EXTENSIONS: Record<string, string> = {
  "image/png": "png",
  "image/jpeg": "jpg",
  "image/gif": "gif",
  "image/webp": "webp",
  "image/svg+xml": "svg",
  "audio/wav": "wav",
  "audio/x-wav": "wav",
  "audio/mpeg": "mp3",
  "audio/ogg": "ogg",
  "application/pdf": "pdf",
};

export interface SaveMediaOptions {
  workspace: string;
  /** The calling chat's media folder, inside the workspace (chatMediaDir). */
  folder: string;
  /** File name prefix, already safe (the exposed tool name). */
  prefix: string;
  maxBytes?: number;
  now?: () => number;
  /** Told about a block that could not be written (the others are still saved). */
  onError?: (err: unknown) => void;
}

/**
 * Writes every binary block of `result` to the chat's media folder and returns
 * content index → workspace-relative path. Blocks that are too big, or fail to
 * save, are left out (the text still describes them).
 */
export async function saveResultMedia(
  result: CallToolResult,
  opts: SaveMediaOptions,
): Promise<Map<number, string>> {
  const saved = new Map<number, string>();
  const maxBytes = opts.maxBytes ?? MAX_MEDIA_BYTES;
  const stamp = (opts.now ?? Date.now)();
  const blocks = result.content ?? [];
  for (let i = 0; i < blocks.length; i++) {
    const block = blocks[i]!;
    let data: string | undefined;
    let mime: string | undefined;
    if (block.type === "image" || block.type === "audio") {
      data = block.data;
      mime = block.mimeType;
    } else if (block.type === "resource" && "blob" in block.resource) {
      data = block.resource.blob;
      mime = block.resource.mimeType;
    }
    if (data === undefined || base64Bytes(data) > maxBytes) continue;
    const name = `${opts.prefix}_${stamp}_${i}.${EXTENSIONS[mime ?? ""] ?? "bin"}`;
    try {
      await mkdirPrivate(opts.folder);
      await writeFilePrivate(join(opts.folder, name), Buffer.from(data, "base64"));
      saved.set(i, relative(opts.workspace, join(opts.folder, name)));
    } catch (err) {
      opts.onError?.(err);
    }
  }
  return saved;
}
