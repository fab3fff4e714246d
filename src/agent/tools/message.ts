/**
 * The `message` tool: the model sends a message to a chat by itself, in the
 * middle of a turn or to another chat. When it writes to the turn's own chat
 * the runner leaves out its final reply, so the user does not get it twice.
 */
import { stat } from "node:fs/promises";
import { isAbsolute, resolve } from "node:path";
import { z } from "zod";
import { ToolError } from "../../util/errors.js";
import { defineTool, type Tool } from "./types.js";
import { expandPath } from "./workspace-paths.js";

export function createMessageTool(): Tool {
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
      const files = await resolveMedia(media ?? [], ctx.workspace);
      if (content.trim() === "" && files.length === 0) throw new ToolError("the message is empty");
      const toOrigin = targetChannel === ctx.channel && targetChat === ctx.chatId;
      ctx.publish({
        channel: targetChannel,
        chatId: targetChat,
        content,
        kind: "final",
        ...(files.length ? { media: files } : {}),
        // The inbound metadata (thread id, message id) only makes sense in its own chat.
        ...(toOrigin && ctx.metadata ? { metadata: ctx.metadata } : {}),
      });
      if (toOrigin) ctx.turn.sentToOriginChat = true;
      const attached = files.length ? ` with ${files.length} attachment${files.length > 1 ? "s" : ""}` : "";
      return `Message sent to ${targetChannel}:${targetChat}${attached}`;
    },
  });
}

/** Attachments as absolute paths (relative ones are in the workspace); each must exist. */
async function resolveMedia(paths: string[], workspace: string): Promise<string[]> {
  return Promise.all(
    paths.map(async (p) => {
      const abs = isAbsolute(p) ? p : expandPath(p, resolve(workspace));
      const st = await stat(abs).catch(() => null);
      if (!st?.isFile()) throw new ToolError(`attachment not found: ${p}`);
      return abs;
    }),
  );
}
