/**
 * load_tools: adds the full schemas of tools from the system prompt's directory (tool tiers,
 * agent/tool-tiers.ts) to this conversation's calls, from the next step on and for the rest of
 * the session (the loaded set is kept in the session's metadata).
 */
import * as z from "zod";
import type { ToolTiers } from "../tool-tiers.js";
import type { PlanSessions } from "./todo.js";
import { defineTool } from "./types.js";

export function createLoadToolsTool(tiers: ToolTiers, sessions: PlanSessions) {
  return defineTool({
    name: "load_tools",
    readOnly: true,
    description:
      'Load tools listed under "More tools" in your instructions, by name or glob (e.g. mcp_github_*), ' +
      "so you can call them from your next step on.",
    parameters: z.object({
      names: z.array(z.string().min(1)).min(1).max(100).describe("Tool names or globs"),
    }),
    async execute({ names }, ctx) {
      const matched = tiers.match(names);
      if (matched.length === 0) {
        return `No tool matches ${names.join(", ")}.\n\n${tiers.directory() ?? "There are no more tools to load."}`;
      }
      const session = await sessions.get(ctx.sessionKey);
      if (tiers.load(session.metadata, matched)) await sessions.saveMetadata(session);
      return `Loaded: ${matched.join(", ")}. Call them from your next step on.`;
    },
  });
}
