/**
 * A Discord message's attachments as IncomingFiles for the shared inbound
 * path: Discord states each file's size and type up front, so a file over
 * the limit is never fetched, and voice messages and audio files are known
 * (and transcribed) before the download.
 */
import type { IncomingFile } from "../inbound.js";
import { downloadFile, mediaPath } from "../media.js";
import { type DiscordAttachmentView, type DiscordMessageView } from "./mapping.js";

interface DownloadContext {
  workspace: string;
  maxMediaBytes: number;
  timeoutMs?: number;
}

export function incomingFiles(view: DiscordMessageView, ctx: DownloadContext): IncomingFile[] {
  return view.attachments.map((attachment) => {
    const { kind, label } = kindOf(attachment, view.voiceMessage === true);
    return {
      kind,
      label,
      name: attachment.name,
      sizeBytes: attachment.size,
      fetch: (signal, chat) =>
        downloadFile({
          url: attachment.url,
          dest: mediaPath(ctx.workspace, chat, attachment.name || `attachment-${attachment.id}`),
          maxBytes: ctx.maxMediaBytes,
          expectedBytes: attachment.size,
          timeoutMs: ctx.timeoutMs,
          signal,
        }),
    };
  });
}

function kindOf(
  attachment: DiscordAttachmentView,
  voiceMessage: boolean,
): Pick<IncomingFile, "kind" | "label"> {
  const type = attachment.contentType ?? "";
  // A voice message is one audio/ogg attachment on a message flagged IS_VOICE_MESSAGE.
  if (type.startsWith("audio/"))
    return voiceMessage ? { kind: "voice", label: "voice message" } : { kind: "audio", label: "audio file" };
  if (type.startsWith("image/")) return { kind: "image", label: "image" };
  if (type.startsWith("video/")) return { kind: "video", label: "video" };
  return { kind: "file", label: "file" };
}
