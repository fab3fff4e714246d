/**
 * A web conversation as the page shows it, from the session file `web:<id>`: the person's messages
 * and the assistant's answers (tool calls and their results left out), and the list of
 * conversations from the sessions folder, newest first.
 */
import { open } from "node:fs/promises";
import { basename } from "node:path";
import type { ChatMessage } from "../../llm/types.js";
import type { SessionInfo } from "../../sessions/storage.js";
import { parseTimestamp } from "../../sessions/store.js";
import type { ConversationSummary, FileRef, HistoryMessage } from "./protocol.js";

export const SESSION_PREFIX = "web:";
/** What the page calls a conversation with no message yet. */
export const NEW_CHAT_TITLE = "New chat";
const TITLE_CHARS = 60;
/** Bytes read from a session file to find its first user message (for the title). */
const TITLE_SCAN_BYTES = 64 * 1024;
/** Conversations listed at most. */
const MAX_LISTED = 200;

const ATTACHED = /^\[Attached file: (.+)\]$/;
/** media.ts names a download <yyyymmdd>-<8 hex>-<name>: the page shows <name>. */
const MEDIA_PREFIX = /^\d{8}-[0-9a-f]{8}-/;

export function sessionKeyOf(conversationId: string): string {
  return `${SESSION_PREFIX}${conversationId}`;
}

/** The page's view of a session's messages. */
export function historyOf(messages: readonly ChatMessage[]): HistoryMessage[] {
  const out: HistoryMessage[] = [];
  for (const m of messages) {
    const at = parseTimestamp(m.timestamp)?.toISOString();
    if (m.role === "user") {
      const { text, files } = splitAttachments(textOf(m.content));
      out.push({ role: "user", content: text, ...(at ? { at } : {}), ...(files.length ? { files } : {}) });
    } else if (m.role === "assistant" && !m.tool_calls?.length) {
      const text = textOf(m.content);
      if (text.trim() !== "") out.push({ role: "assistant", content: text, ...(at ? { at } : {}) });
    }
  }
  return out;
}

/** A message's text: a string as it is, parts joined (an inlined image is stored as "[image]"). */
function textOf(content: ChatMessage["content"]): string {
  if (content === null) return "";
  if (typeof content === "string") return content;
  return content.map((part) => (part.type === "text" ? part.text : "")).join("\n");
}

/** The context builder adds "[Attached file: <path>]" lines for uploads: the page shows them as files. */
function splitAttachments(text: string): { text: string; files: FileRef[] } {
  const files: FileRef[] = [];
  const kept = text.split("\n").filter((line) => {
    const match = ATTACHED.exec(line.trim());
    if (match) files.push({ name: basename(match[1]!).replace(MEDIA_PREFIX, "") });
    return !match;
  });
  return { text: kept.join("\n").trim(), files };
}

/** The title of a conversation: its first line, shortened. */
export function titleOf(text: string): string {
  const line =
    text
      .split("\n")
      .find((l) => l.trim() !== "" && l.trim() !== "[image]")
      ?.trim() ?? "";
  if (line === "") return NEW_CHAT_TITLE;
  return line.length > TITLE_CHARS ? `${line.slice(0, TITLE_CHARS - 1)}…` : line;
}

/** The web conversations among the session files, newest first, with their titles. */
export async function listConversations(
  sessions: readonly SessionInfo[],
  busy: (conversationId: string) => boolean,
): Promise<ConversationSummary[]> {
  const web = sessions.filter((s) => s.key.startsWith(SESSION_PREFIX)).slice(0, MAX_LISTED);
  return Promise.all(
    web.map(async (s) => {
      const id = s.key.slice(SESSION_PREFIX.length);
      return {
        id,
        title: titleOf(splitAttachments(await titleTextOf(s)).text),
        updatedAt: s.updatedAt.toISOString(),
        busy: busy(id),
      };
    }),
  );
}

/** The text a conversation's title comes from: its first user message, as the store has it. */
function titleTextOf(s: SessionInfo): Promise<string> {
  if (s.firstUserContent !== undefined) return Promise.resolve(textOf(s.firstUserContent));
  return s.path === undefined ? Promise.resolve("") : firstUserText(s.path);
}

/** The first user message in the first bytes of a session file ("" when there is none there). */
async function firstUserText(path: string): Promise<string> {
  let text: string;
  try {
    const file = await open(path, "r");
    try {
      const buffer = Buffer.alloc(TITLE_SCAN_BYTES);
      const { bytesRead } = await file.read(buffer, 0, TITLE_SCAN_BYTES, 0);
      text = buffer.subarray(0, bytesRead).toString("utf8");
    } finally {
      await file.close();
    }
  } catch {
    return "";
  }
  for (const line of text.split("\n")) {
    try {
      const parsed = JSON.parse(line) as Partial<ChatMessage>;
      if (parsed.role === "user") return textOf(parsed.content ?? null);
    } catch {
      // the cut-off last line, or a broken one: the title only needs the first good user line
    }
  }
  return "";
}
