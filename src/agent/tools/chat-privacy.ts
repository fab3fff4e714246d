/**
 * Other people's conversations are out of reach: a turn's file tools, exec
 * and the message tool's attachments never touch `sessions/` (every chat's
 * history, this one's included: palaver's own tools read it, with their
 * scope) nor any media folder but the turn's own chat's
 * (`media/<channel>/<chat>/`, util/chat-folders.ts). Files left directly
 * in `media/<channel>/` by older versions belong to no known chat, so they
 * stay closed too. Checked on real paths, like the workspace boundary, so a
 * symlink cannot lead around it.
 */
import { join, relative } from "node:path";
import { chatMediaDir, MEDIA_DIR, SESSIONS_DIR, type ChatRef } from "../../util/chat-folders.js";
import { ToolError } from "../../util/errors.js";
import { expandPath, isInside, realPathLoose } from "../../workspace/paths.js";

/** The per-chat folders of a workspace as real paths, and the one the turn may use. */
export interface ChatFolders {
  workspace: string;
  sessions: string;
  media: string;
  ownMedia: string;
}

export async function chatFolders(workspace: string, chat: ChatRef): Promise<ChatFolders> {
  const root = await realPathLoose(expandPath(workspace, process.cwd()));
  const [sessions, media, ownMedia] = await Promise.all([
    realPathLoose(join(root, SESSIONS_DIR)),
    realPathLoose(join(root, MEDIA_DIR)),
    realPathLoose(chatMediaDir(root, chat)),
  ]);
  return { workspace: root, sessions, media, ownMedia };
}

/**
 * Why a real path belongs to another conversation (or to the conversations
 * as a whole), for the refusal; null when the turn may use it. `shown` is the
 * path as the model gave it.
 */
export function privateChatReason(real: string, shown: string, folders: ChatFolders): string | null {
  if (isInside(real, folders.sessions)) {
    return (
      `access denied: ${shown} is in ${SESSIONS_DIR}/, which holds the conversations palaver keeps ` +
      "(every chat's, this one's too); file tools and commands never read them. To recall earlier " +
      "conversations use the memory (memory/MEMORY.md, memory/HISTORY.md and the memory tools)."
    );
  }
  if (isInside(real, folders.media) && !isInside(real, folders.ownMedia)) {
    const own = relative(folders.workspace, folders.ownMedia) || folders.ownMedia;
    return (
      `access denied: ${shown} is in ${MEDIA_DIR}/ outside this chat's own folder ${own}/. Each chat's ` +
      "attachments are private to it: a turn reaches only its own chat's media folder."
    );
  }
  return null;
}

/** Throws the refusal when `target` (an absolute path) belongs to another conversation. */
export async function refuseOtherChats(
  target: string,
  shown: string,
  workspace: string,
  chat: ChatRef,
): Promise<void> {
  const [real, folders] = await Promise.all([realPathLoose(target), chatFolders(workspace, chat)]);
  const reason = privateChatReason(real, shown, folders);
  if (reason) throw new ToolError(reason);
}
