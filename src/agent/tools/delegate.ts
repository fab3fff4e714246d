/**
 * The `delegate` tool: hands one task to a named agent (agents/<name>.md) and waits for its final
 * answer, which is the tool's result. Several delegate calls in one response run at the same
 * time. Each agent that can delegate gets its own instance, knowing the chain it runs on (the
 * cycle and depth guard) and which agents its file lets it call.
 */
import * as z from "zod";
import { defineTool, type Tool, type ToolContext } from "./types.js";

export interface DelegateToolOptions {
  /** agents/named-agents.ts `NamedAgents`, which builds this tool (so it is named here by shape). */
  agents: {
    delegate(name: string, task: string, parent: ToolContext, stack: readonly string[]): Promise<string>;
  };
  /** The agents already working on this request, the caller last (empty for the main agent). */
  stack: readonly string[];
  /** Whether the caller's `tools` let it call this agent. */
  mayCall: (agent: string) => boolean;
}

export function createDelegateTool({ agents, stack, mayCall }: DelegateToolOptions): Tool {
  return defineTool({
    name: "delegate",
    parallel: true,
    replayNote:
      "Note: this answer is from before the assistant restarted; the agent is not running any more.",
    description:
      "Give a task to a named agent (see the agents list) and wait for its answer. The agent starts " +
      "fresh: put everything it needs into the task. Several delegate calls in one reply run in parallel.",
    parameters: z.object({
      agent: z.string().describe("The agent's name"),
      task: z.string().min(1).describe("What the agent should do, with all the context it needs"),
    }),
    async execute({ agent, task }, ctx) {
      if (!mayCall(agent)) {
        const caller = stack.at(-1) ?? "this agent";
        return `Error: refused: ${caller} may not delegate to "${agent}" (its tools do not allow it).`;
      }
      return agents.delegate(agent, task, ctx, stack);
    },
  });
}
