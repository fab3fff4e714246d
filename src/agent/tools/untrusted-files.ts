/**
 * Which files are untrusted content for a turn: files the turn did not get from its own sender.
 * Every chat's attachments (and the web chat's uploads) land in the workspace's `media/` folder
 * (channels/media.ts), so a file there that is not attached to the message this turn answers was
 * sent by someone else, in another message or another chat: reading it marks the turn
 * (approvals/outward.ts). The workspace's own files (notes, memory, skills) are the owner's.
 *
 * Lexical, like the approval policy: a symlink into media/ from elsewhere is not followed.
 */
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import type { Tool, ToolContext } from "./types.js";
import { isInside } from "../../workspace/paths.js";

/** The attachment's path when `path` is a file in media/ other than this turn's own attachments, else null. */
export function othersAttachment(path: string, ctx: Pick<ToolContext, "workspace" | "media">): string | null {
  const abs = absolute(path, ctx.workspace);
  if (!isInside(abs, join(ctx.workspace, "media"))) return null;
  const own = (ctx.media ?? []).map((p) => absolute(p, ctx.workspace));
  return own.includes(abs) ? null : abs;
}

/** read_file, declaring its output untrusted when it reads another sender's attachment. */
export function withUntrustedAttachments(tool: Tool): Tool {
  if (tool.name !== "read_file") return tool;
  return {
    ...tool,
    untrustedSource: (args: unknown, ctx: ToolContext) =>
      hasPath(args) ? othersAttachment(args.path, ctx) : null,
  };
}

function hasPath(args: unknown): args is { path: string } {
  return typeof args === "object" && args !== null && typeof (args as { path?: unknown }).path === "string";
}

function absolute(path: string, workspace: string): string {
  if (path === "~") return homedir();
  if (path.startsWith("~/")) return join(homedir(), path.slice(2));
  return resolve(workspace, path);
}
