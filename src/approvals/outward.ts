/**
 * Outward calls: tool calls that carry data out of the conversation, asked in modes "risky" and
 * "all" whatever a chat's "always allow" rules say (README, "Approvals"). Pure and synchronous, one
 * of the policy's layers (policy.ts), checked after the destructive guard and before the chat rules.
 *
 * Asked in every turn:
 *   message   to a chat other than the turn's own, or with attachments
 *   cron add  a job runs later as a turn of its own on its message, with every tool (cron/service.ts
 *             fires it as an agent turn), so no job is a plain reminder the policy could tell apart
 *             from one that sends or fetches: every add is asked; list and remove are not
 *
 * Asked in a turn that has read untrusted content (TurnState.untrusted: a fetched page, search
 * results, an MCP server's result, another sender's attachment), because that content may be what
 * asks for the call:
 *   web_fetch, web_search   a URL or query with words the sender did not write (wordsNotFromSender)
 *   exec                    any command, when commands have network access
 *   write_file, edit_file   files that steer later turns beyond this conversation (steersLaterTurns),
 *                           and any file outside the workspace
 *   mcp_*                   tools the server does not declare read-only (annotations.readOnlyHint)
 *
 * spawn is not asked: the subagent starts marked and its own calls are judged by the same rules.
 */
import { homedir } from "node:os";
import { isAbsolute, join, relative, resolve, sep } from "node:path";
import { BOOTSTRAP_FILES } from "../agent/context.js";
import type { ApprovalDecision, ApprovalRequest } from "./types.js";

export interface OutwardOptions {
  mode: "off" | "risky" | "all";
  /** tools.restrictToWorkspace: the file tools refuse paths outside the workspace themselves. */
  restrictToWorkspace: boolean;
  /** The user's home folder, for `~` in paths (default: os.homedir()). */
  home?: string;
}

/** Workspace files read into every later turn's prompt (context.ts) or run by the heartbeat. */
const STEERING_FILES = new Set([...BOOTSTRAP_FILES, "HEARTBEAT.md"].map((f) => f.toLowerCase()));
/** Workspace folders whose files steer later turns: long-term memory, skills, agent definitions. */
const STEERING_FOLDERS = ["memory", "skills", "agents"];
/** Words every URL has: they carry nothing from the conversation. */
const URL_WORDS = new Set(["http", "https", "www"]);
/** How many of the words the sender did not write the prompt shows. */
const SHOWN_WORDS = 5;

/** The outward layer's decision: "ask" (never with "always allow"), or null when it has nothing to say. */
export function outwardRisk(req: ApprovalRequest, opts: OutwardOptions): ApprovalDecision | null {
  if (opts.mode === "off") return null;
  const why = alwaysOutward(req) ?? (req.untrusted?.length ? markedOutward(req, opts) : null);
  return why === null ? null : { action: "ask", reason: why, layer: "builtin" };
}

/** Item 1: why this call is asked in any turn, or null. */
function alwaysOutward(req: ApprovalRequest): string | null {
  const { tool, args } = req;
  if (tool === "message") {
    const channel = text(args.channel) || req.channel;
    const chatId = text(args.chat_id) || req.chatId;
    const media = Array.isArray(args.media) ? args.media.filter((m) => typeof m === "string") : [];
    const elsewhere = channel !== req.channel || chatId !== req.chatId;
    const files = media.length
      ? `attaches ${media.length === 1 ? "a file" : `${media.length} files`} (${media.join(", ")})`
      : "";
    if (elsewhere && files) return `sends a message to another chat (${channel}:${chatId}) and ${files}`;
    if (elsewhere) return `sends a message to another chat (${channel}:${chatId})`;
    if (files) return `sends a message that ${files}`;
    return null;
  }
  if (tool === "cron" && args.action === "add") {
    return "schedules a job: each time it fires, it runs on its own as a turn in this chat, with tools";
  }
  return null;
}

/** Item 2: why this call of a marked turn is asked, or null. */
function markedOutward(req: ApprovalRequest, opts: OutwardOptions): string | null {
  const { tool, args } = req;
  const sender = req.senderText ?? "";
  if (tool === "web_fetch" || tool === "web_search") {
    const value = text(tool === "web_fetch" ? args.url : args.query);
    const added = wordsNotFromSender(value, sender);
    if (added.length === 0) return null;
    const what = tool === "web_fetch" ? "fetches a URL" : "searches for words";
    return `${what} with text that is not from the sender's messages (${shownWords(added)})`;
  }
  if (tool === "exec") {
    return req.execNetwork === false ? null : "runs a shell command, and commands can reach the network";
  }
  if (tool === "write_file" || tool === "edit_file") {
    const target = absolutePath(text(args.path), req.workspace, opts.home ?? homedir());
    const inWorkspace = relativeInside(target, resolve(req.workspace));
    // Outside the workspace with restrictToWorkspace the tool refuses it itself: no point asking.
    if (inWorkspace === null)
      return opts.restrictToWorkspace ? null : `writes outside the workspace (${target})`;
    return steersLaterTurns(inWorkspace) ? `writes ${inWorkspace}, which later conversations read` : null;
  }
  if (tool.startsWith("mcp_") && !req.readOnly) {
    return "calls an MCP tool that its server does not declare read-only";
  }
  return null;
}

/**
 * The words of a URL or query that the sender did not write, lowercased: runs of letters and digits
 * after percent-decoding, compared with the words of the sender's messages. The model may reorder
 * or drop the sender's words but not add its own, so text it read elsewhere (a file's contents, a
 * link from the page) cannot leave in a URL unasked, however it is split or encoded.
 */
export function wordsNotFromSender(value: string, senderText: string): string[] {
  const sent = new Set(words(senderText));
  return [...new Set(words(decoded(value)))].filter((w) => !sent.has(w) && !URL_WORDS.has(w));
}

/**
 * Whether a workspace-relative path names a file that steers turns beyond this conversation: a
 * bootstrap file (AGENTS.md, SOUL.md, USER.md, TOOLS.md, IDENTITY.md, read into every prompt),
 * HEARTBEAT.md (run by the heartbeat), or anything under memory/, skills/ or agents/.
 */
export function steersLaterTurns(inWorkspace: string): boolean {
  const parts = inWorkspace
    .toLowerCase()
    .split(sep)
    .filter((p) => p !== "" && p !== ".");
  if (parts.length === 1) return STEERING_FILES.has(parts[0]!);
  return parts.length > 1 && STEERING_FOLDERS.includes(parts[0]!);
}

function words(value: string): string[] {
  return value.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

/** Percent-decoded (and `+` as a space) where it decodes; as it is otherwise. */
function decoded(value: string): string {
  const spaced = value.replace(/\+/g, " ");
  try {
    return decodeURIComponent(spaced);
  } catch {
    return spaced;
  }
}

function shownWords(added: readonly string[]): string {
  const shown = added.slice(0, SHOWN_WORDS).map((w) => (w.length > 24 ? `${w.slice(0, 23)}…` : w));
  const more = added.length - shown.length;
  return `${shown.join(", ")}${more > 0 ? ` and ${more} more` : ""}`;
}

/** The path relative to `folder` when inside it ("" for the folder itself), else null. */
function relativeInside(path: string, folder: string): string | null {
  const rel = relative(folder, path);
  return rel === ".." || rel.startsWith(`..${sep}`) || isAbsolute(rel) ? null : rel;
}

/** A path argument as the file tools take it: `~` is the home folder, relative paths start in the workspace. */
function absolutePath(path: string, workspace: string, home: string): string {
  if (path === "~") return home;
  if (path.startsWith("~/")) return join(home, path.slice(2));
  return resolve(workspace, path);
}

function text(value: unknown): string {
  if (typeof value === "number") return String(value);
  return typeof value === "string" ? value : "";
}
