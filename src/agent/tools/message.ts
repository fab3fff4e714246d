/**
 * The `message` tool: the model sends a message to a chat by itself, in the
 * middle of a turn or to another chat. When it writes to the turn's own chat
 * the runner leaves out its final reply, so the user does not get it twice.
 *
 * It is the one tool that moves data out of the machine on the model's word,
 * so a prompt injection must not turn it into an exfiltration channel:
 * attachments follow the file tools' workspace policy and are never palaver's
 * own secrets (config, `.env`, state folder) nor another chat's data (a session
 * file, another chat's media: chat-privacy.ts), and only chats palaver already
 * knows can be written to.
 */
import { stat } from "node:fs/promises";
import * as z from "zod";
import { replyPlaceOf } from "../../bus/types.js";
import { ToolError } from "../../util/errors.js";
import { refuseOtherChats } from "./chat-privacy.js";
import { defineTool, type Tool, type ToolContext } from "./types.js";
import { resolveNonSecretPath, type SecretPaths } from "../../workspace/paths.js";

/** What the tool may know about chats other than the turn's own. */
export interface MessageTargets {
  /** Whether palaver has a session with this chat (someone there talked to the bot before). */
  hasSession(channel: string, chatId: string): Promise<boolean>;
  /** The channel's allowFrom as configured now; undefined when palaver has no such channel. */
  allowFrom(channel: string): readonly string[] | undefined;
}

export interface MessageToolOptions {
  /** tools.restrictToWorkspace: attachments must be inside the workspace. */
  restrictToWorkspace: boolean;
  /** Never attached, even when restrictToWorkspace is off. */
  secrets?: SecretPaths;
  /** Without it, the tool writes only to the turn's own chat. */
  targets?: MessageTargets;
}

export function createMessageTool(opts: MessageToolOptions = { restrictToWorkspace: true }): Tool {
  return defineTool({
    name: "message",
    description: "Send a message to the user. Use this when you want to communicate something.",
    parameters: z.object({
      content: z.string().describe("The message content to send"),
      channel: z.string().optional().describe("Optional: target channel (telegram, discord, etc.)"),
      chat_id: z
        .union([z.string(), z.number().transform(String)])
        .optional()
        .describe("Optional: target chat/user ID"),
      media: z
        .array(z.string())
        .optional()
        .describe("Optional: list of file paths to attach (images, audio, documents)"),
    }),
    async execute({ content, channel, chat_id, media }, ctx) {
      const targetChannel = channel || ctx.channel;
      const targetChat = chat_id || ctx.chatId;
      if (!targetChannel || !targetChat)
        throw new ToolError("no target channel/chat_id to send the message to");
      const toOrigin = targetChannel === ctx.channel && targetChat === ctx.chatId;
      if (!toOrigin) await checkTarget(targetChannel, targetChat, opts.targets);
      const files = await resolveMedia(media ?? [], ctx, opts);
      if (content.trim() === "" && files.length === 0) throw new ToolError("the message is empty");
      ctx.publish({
        channel: targetChannel,
        chatId: targetChat,
        content,
        kind: "final",
        ...(files.length ? { media: files } : {}),
        // The thread and the inbound metadata only make sense in their own chat.
        ...(toOrigin ? replyPlaceOf(ctx) : {}),
        ...(toOrigin && ctx.metadata ? { metadata: ctx.metadata } : {}),
      });
      if (toOrigin) ctx.turn.sentToOriginChat = true;
      const attached = files.length ? ` with ${files.length} attachment${files.length > 1 ? "s" : ""}` : "";
      return `Message sent to ${targetChannel}:${targetChat}${attached}`;
    },
  });
}

/**
 * Another chat is allowed when palaver has a session with it, or when the
 * channel's allowFrom names it (a direct chat whose id is the user's id).
 * `"*"` does not count: letting everybody in is not a reason to write to
 * strangers first.
 */
async function checkTarget(
  channel: string,
  chatId: string,
  targets: MessageTargets | undefined,
): Promise<void> {
  const allowFrom = targets?.allowFrom(channel);
  if (allowFrom?.includes(chatId)) return;
  if (targets && (await targets.hasSession(channel, chatId))) return;
  if (targets && allowFrom === undefined) {
    throw new ToolError(`cannot send to ${channel}:${chatId}: palaver has no channel named "${channel}"`);
  }
  throw new ToolError(
    `cannot send to ${channel}:${chatId}: the message tool only writes to chats that have talked to ` +
      `palaver before, or to users listed in channels.${channel}.allowFrom. Reply in this chat instead ` +
      "(leave channel and chat_id out).",
  );
}

/** Attachments as absolute paths (relative ones are in the workspace); each must be an existing file palaver may send. */
async function resolveMedia(paths: string[], ctx: ToolContext, opts: MessageToolOptions): Promise<string[]> {
  const policy = { workspace: ctx.workspace, restrict: opts.restrictToWorkspace };
  const secrets = opts.secrets ?? {};
  return Promise.all(
    paths.map(async (p) => {
      const abs = await resolveNonSecretPath(p, policy, secrets);
      await refuseOtherChats(abs, p, ctx.workspace, ctx);
      const st = await stat(abs).catch(() => null);
      if (!st?.isFile()) throw new ToolError(`attachment not found: ${p}`);
      return abs;
    }),
  );
}
