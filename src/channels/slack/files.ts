/**
 * Files shared in Slack as the inbound path's IncomingFiles: what each one is
 * (an audio clip is transcribed), and its download with the bot token, which
 * only Slack's own hosts ever get.
 */
import { readFile, rm } from "node:fs/promises";
import type { ChatRef } from "../../util/chat-folders.js";
import type { Logger } from "../../log.js";
import { ChannelError } from "../../util/errors.js";
import type { IncomingFile } from "../inbound.js";
import { downloadFile, mediaPath } from "../media.js";
import { fileNameOf, isSlackFileUrl, type SlackFile } from "./mapping.js";

/** More files than this in one message are not fetched (a note says how many were left). */
export const MAX_FILES = 10;

export interface SlackFileOptions {
  botToken: string;
  /** The configured Web API base ("" for Slack's): its host may serve files too (a fake, a proxy). */
  apiUrl: string;
  workspace: string;
  maxMediaBytes: number;
  downloadTimeoutMs: number;
  log: Logger;
}

/** The files of a message, and a note for the ones past MAX_FILES. */
export function incomingFiles(
  files: readonly SlackFile[],
  opts: SlackFileOptions,
): { files: IncomingFile[]; note?: string } {
  const taken = files.slice(0, MAX_FILES).map((file) => incomingFile(file, opts));
  const left = files.length - taken.length;
  return left > 0 ? { files: taken, note: `[${left} more files were not downloaded]` } : { files: taken };
}

function incomingFile(file: SlackFile, opts: SlackFileOptions): IncomingFile {
  const name = fileNameOf(file);
  const { kind, label } = kindOf(file);
  return {
    kind,
    label,
    name,
    ...(typeof file.size === "number" ? { sizeBytes: file.size } : {}),
    fetch: (signal, chat) => download(file, name, opts, chat, signal),
  };
}

/** Slack's own clips say so in `subtype`; anything else goes by its mimetype. */
function kindOf(file: SlackFile): Pick<IncomingFile, "kind" | "label"> {
  const mime = file.mimetype ?? "";
  if (file.subtype === "slack_audio") return { kind: "voice", label: "audio clip" };
  if (file.subtype === "slack_video") return { kind: "video", label: "video clip" };
  if (mime.startsWith("audio/")) return { kind: "audio", label: "audio file" };
  if (mime.startsWith("image/")) return { kind: "image", label: "image" };
  if (mime.startsWith("video/")) return { kind: "video", label: "video" };
  return { kind: "file", label: "file" };
}

async function download(
  file: SlackFile,
  name: string,
  opts: SlackFileOptions,
  chat: ChatRef,
  signal: AbortSignal,
): Promise<string> {
  const url = file.url_private_download ?? file.url_private;
  if (!url || file.mode === "tombstone" || file.mode === "hidden_by_limit") {
    throw new ChannelError("it is not available to the bot");
  }
  if (!isSlackFileUrl(url, opts.apiUrl)) {
    opts.log.warn({ url }, "file URL is not on a Slack host; not sending the bot token there");
    throw new ChannelError("it is not on a Slack host");
  }
  const dest = await downloadFile({
    url,
    dest: mediaPath(opts.workspace, chat, name),
    // The declared size was checked by the inbound path; this bounds what actually arrives.
    maxBytes: opts.maxMediaBytes,
    headers: { Authorization: `Bearer ${opts.botToken}` },
    signal,
    timeoutMs: opts.downloadTimeoutMs,
  });
  if (await isLoginPage(dest, file.mimetype)) {
    await rm(dest, { force: true });
    opts.log.warn({ file: name }, "Slack sent a sign-in page instead of the file: add the files:read scope");
    throw new ChannelError("the bot lacks the files:read scope");
  }
  return dest;
}

/** Slack answers a file URL with its sign-in page when the token may not read files. */
async function isLoginPage(path: string, mimetype: string | null | undefined): Promise<boolean> {
  if (mimetype?.includes("html")) return false;
  const head = (await readFile(path)).subarray(0, 512).toString("utf8").trimStart().toLowerCase();
  return head.startsWith("<!doctype html") || head.startsWith("<html");
}
