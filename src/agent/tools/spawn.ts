/**
 * The `spawn` tool: the model hands a long task to a background subagent and
 * goes on answering. The result comes back later as a system message in this
 * same chat (and thread), so the tool only says that it started.
 */
import * as z from "zod";
import { replyPlaceOf } from "../../bus/types.js";
import type { AgentDefinition } from "../agents/definition.js";
import type { NamedAgents, PreparedAgent } from "../agents/named-agents.js";
import type { SubagentManager } from "../subagents.js";
import { defineTool, type Tool } from "./types.js";

/** `agents`: the named agents `agent` may name (absent: spawn runs the generic worker only). */
export function createSpawnTool(
  manager: Pick<SubagentManager, "spawn">,
  agents?: Pick<NamedAgents, "directory" | "prepare">,
): Tool {
  return defineTool({
    name: "spawn",
    // Subagents do not survive a restart, and their report went with them.
    replayNote:
      "Note: the assistant restarted since this subagent was started; the restart stopped it, so it will " +
      "not report back. Its work may be partly done. Spawn it again only if the task is safe to repeat.",
    description:
      "Spawn a subagent to handle a task in the background. Use this for complex or time-consuming tasks " +
      "that can run independently. The subagent will complete the task and report back when done.",
    parameters: z.object({
      task: z.string().describe("The task for the subagent to complete"),
      label: z.string().optional().describe("Optional short label for the task (for display)"),
      agent: z.string().optional().describe("Optional: a named agent (see the agents list) to do it"),
    }),
    async execute({ task, label, agent }, ctx) {
      let named: PreparedAgent | undefined;
      if (agent !== undefined) {
        const known = agents ? (await agents.directory.catalog()).agents : new Map<string, AgentDefinition>();
        const def = known.get(agent);
        if (!def || !agents) {
          return `Error: there is no agent named "${agent}". Agents: ${[...known.keys()].join(", ") || "(none)"}.`;
        }
        named = await agents.prepare(def, "spawn");
      }
      const started = manager.spawn({
        task,
        ...(label !== undefined ? { label } : {}),
        ...(named ? { agent: named } : {}),
        origin: {
          channel: ctx.channel,
          chatId: ctx.chatId,
          sessionKey: ctx.sessionKey,
          ...replyPlaceOf(ctx),
          ...(ctx.metadata ? { metadata: ctx.metadata } : {}),
        },
        // The subagent inherits the approval rules of this turn (approvals/outward.ts).
        ...(ctx.senderText !== undefined ? { senderText: ctx.senderText } : {}),
        ...(ctx.turn.untrusted?.length ? { untrusted: ctx.turn.untrusted } : {}),
      });
      return spawnText(started);
    },
  });
}

/** What the model is told; it usually passes the gist on to the user. */
export function spawnText(started: { id: string; label: string; queued: boolean }): string {
  const { id, label, queued } = started;
  return queued
    ? `Subagent "${label}" queued (id ${id}); it starts when another one finishes. I'll report back when it finishes.`
    : `Subagent "${label}" started (id ${id}). I'll report back when it finishes.`;
}
