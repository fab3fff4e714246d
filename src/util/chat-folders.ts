/**
 * Where the workspace keeps what belongs to one conversation: `sessions/`
 * (every chat's history, one JSONL file each) and `media/<channel>/<chat>/`
 * (the attachments a chat sent, and files made for it). Channels write there;
 * the file tools and exec keep a turn out of all of it except its own chat's
 * media folder (agent/tools/chat-privacy.ts), so one chat never reads
 * another's conversation or files.
 */
import { createHash } from "node:crypto";
import { join } from "node:path";

export const SESSIONS_DIR = "sessions";
export const MEDIA_DIR = "media";

/** A chat as the tools and channels name it. */
export interface ChatRef {
  channel: string;
  chatId: string;
}

/** Longer encoded names are replaced by a hash, so a folder name stays well under NAME_MAX. */
const MAX_NAME_CHARS = 120;
const KEPT_BYTE = /^[A-Za-z0-9_-]$/;

/**
 * One path segment for a channel name or chat id. Letters, digits, `_` and
 * `-` are kept; every other byte (`.` and `%` too) becomes `%XX`, so two ids
 * never share a folder, and no name is `.`, `..` or starts with a dot (names
 * like `.pending` stay free for palaver's own use). A long id becomes `%h`
 * and a hash, which the encoding itself never produces.
 */
export function chatFolderName(id: string): string {
  let name = "";
  for (const byte of Buffer.from(id, "utf8")) {
    const char = String.fromCharCode(byte);
    name += KEPT_BYTE.test(char) ? char : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  if (name === "") return "%";
  if (name.length <= MAX_NAME_CHARS) return name;
  return `%h${createHash("sha256").update(id).digest("hex").slice(0, 40)}`;
}

/** `<workspace>/media/<channel>/<chat>`: the one media folder a turn in that chat may use. */
export function chatMediaDir(workspace: string, chat: ChatRef): string {
  return join(workspace, MEDIA_DIR, chatFolderName(chat.channel), chatFolderName(chat.chatId));
}
