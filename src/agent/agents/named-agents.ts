/**
 * Named agents at work: what one agent file becomes when it runs (its model, its tools, its
 * prompt), and `delegate`, which runs one within the calling turn. The files are read by
 * AgentDirectory; `spawn` runs the same setup in the background (subagents.ts); a conversation
 * bound to an agent gets it from conversation.ts.
 */
import type { Provider } from "../../llm/types.js";
import { withModel } from "../../llm/with-model.js";
import { globToRegExp } from "../../util/glob.js";
import { formatLocalTime } from "../../util/time.js";
import { withAgentScope } from "../../usage/scope.js";
import type { ContextBudget } from "../budget/budget.js";
import { runTurn, type ApproveCall } from "../runner.js";
import type { SkillsLoader } from "../skills.js";
import { createDelegateTool } from "../tools/delegate.js";
import { ToolRegistry } from "../tools/registry.js";
import type { ToolContext } from "../tools/types.js";
import type { AgentDefinition } from "./definition.js";
import type { AgentDirectory } from "./directory.js";

/** Agents on one delegation chain at most: main → a → b → c; a fourth is refused. */
export const MAX_DELEGATION_DEPTH = 3;

/** Tools no delegate or background agent gets: they talk to the user or start more background work. */
const NOT_FOR_WORKERS = new Set(["message", "ask_human", "spawn", "cron"]);

/** How an agent runs: as a delegate within a turn, in the background (spawn), or as a chat's agent. */
export type AgentRole = "delegate" | "spawn" | "conversation";

/** An agent ready to run: the setup runTurn needs. */
export interface PreparedAgent {
  name: string;
  provider: Provider;
  tools: ToolRegistry;
  maxIterations: number;
  /** The file's body and the bodies of its skills. */
  instructions: string;
}

export interface NamedAgentsOptions {
  directory: AgentDirectory;
  /** The main model's provider. */
  provider: Provider;
  /** agents.defaults.models.utility, for delegates and subagents without a model of their own. */
  utilityModel?: string;
  /** A model name as the provider wants it (the provider prefix handled like the main model's). */
  modelName?: (model: string) => string;
  /** The main agent's tools (MCP tools join later): what an agent's `tools` choose from. */
  pool: ToolRegistry;
  /** Today's subagent tool set: what an agent file without `tools` gets. */
  workerToolNames: () => string[];
  skills?: Pick<SkillsLoader, "loadBody">;
  /** For delegates: the same approval check as the turn that called them. */
  approve?: ApproveCall;
  budget?: ContextBudget;
  /** Iterations of an agent whose file sets none (agents.defaults.subagentMaxIterations). */
  maxIterations: number;
  toolResultMaxChars: number;
  workspace: string;
  now?: () => Date;
}

export class NamedAgents {
  constructor(private readonly opts: NamedAgentsOptions) {}

  get directory(): AgentDirectory {
    return this.opts.directory;
  }

  /** The provider of the utility slot (the main one when unset). */
  get utilityProvider(): Provider {
    return withModel(this.opts.provider, this.model(this.opts.utilityModel));
  }

  /** The agent's provider, tools and instructions for `role`; `stack`: the delegation chain it runs on. */
  async prepare(
    def: AgentDefinition,
    role: AgentRole,
    stack: readonly string[] = [],
  ): Promise<PreparedAgent> {
    const fallback = role === "conversation" ? undefined : this.opts.utilityModel;
    return {
      name: def.name,
      provider: withModel(this.opts.provider, this.model(def.model ?? fallback)),
      tools: this.toolsFor(def, role, [...stack, def.name]),
      maxIterations: def.maxIterations ?? this.opts.maxIterations,
      instructions: await this.instructionsOf(def),
    };
  }

  /**
   * Runs `name` within the calling turn and returns its final answer (the delegate tool's result).
   * `stack`: the agents already working on this request, the caller last. Refusals are text.
   */
  async delegate(name: string, task: string, parent: ToolContext, stack: readonly string[]): Promise<string> {
    const chain = [...stack, name].join(" → ");
    if (stack.includes(name)) {
      return (
        `Error: refused: ${name} is already working on this request (${chain}); an agent on the call ` +
        "stack cannot be called again. Do this part yourself or ask another agent."
      );
    }
    if (stack.length >= MAX_DELEGATION_DEPTH) {
      return `Error: refused: delegation goes at most ${MAX_DELEGATION_DEPTH} agents deep (${chain}). Do this part yourself.`;
    }
    const { agents } = await this.opts.directory.catalog();
    const def = agents.get(name);
    if (!def) {
      const known = [...agents.keys()];
      return `Error: there is no agent named "${name}". Agents: ${known.length ? known.join(", ") : "(none)"}.`;
    }
    const agent = await this.prepare(def, "delegate", stack);
    const reads = parent.turn.untrusted ?? [];
    // A fresh turn state: the delegate cannot answer in the chat, but starts marked like its caller.
    const ctx: ToolContext = {
      ...parent,
      publish: () => undefined,
      turn: { sentToOriginChat: false, untrusted: [...reads] },
    };
    try {
      // Its LLM calls are counted as this agent's, kind "delegate", in the caller's conversation.
      const result = await withAgentScope({ agent: name, kind: "delegate", session: parent.sessionKey }, () =>
        runTurn({
          provider: agent.provider,
          tools: agent.tools,
          messages: [
            { role: "system", content: this.delegatePrompt(agent) },
            { role: "user", content: task },
          ],
          maxIterations: agent.maxIterations,
          toolResultMaxChars: this.opts.toolResultMaxChars,
          ctx,
          ...(this.opts.approve ? { approve: this.opts.approve } : {}),
          ...(this.opts.budget ? { budget: this.opts.budget } : {}),
        }),
      );
      return result.content?.trim() || `${name} finished without an answer.`;
    } finally {
      // What the delegate read marks the calling turn too: its answer may repeat it.
      const added = (ctx.turn.untrusted ?? []).slice(reads.length);
      if (added.length) parent.turn.untrusted = [...(parent.turn.untrusted ?? []), ...added];
    }
  }

  /** The tools `def` may use in `role`; `stack` includes the agent itself. */
  private toolsFor(def: AgentDefinition, role: AgentRole, stack: readonly string[]): ToolRegistry {
    const pool = this.opts.pool;
    const patterns = (def.tools ?? (role === "conversation" ? pool.names : this.opts.workerToolNames())).map(
      (p) => ({ raw: p, re: globToRegExp(p) }),
    );
    const registry = new ToolRegistry();
    for (const name of pool.names) {
      if (name === "delegate") continue;
      if (role !== "conversation" && NOT_FOR_WORKERS.has(name)) continue;
      if (patterns.some((p) => p.re.test(name))) registry.register(pool.get(name)!);
    }
    // `delegate` (or any agent) or `delegate:<glob>` (only those agents).
    const whole = patterns.some((p) => !p.raw.startsWith("delegate:") && p.re.test("delegate"));
    const targets = patterns
      .filter((p) => p.raw.startsWith("delegate:"))
      .map((p) => globToRegExp(p.raw.slice(9)));
    if (whole || targets.length) {
      registry.register(
        createDelegateTool({
          agents: this,
          stack,
          mayCall: (agent) => whole || targets.some((t) => t.test(agent)),
        }),
      );
    }
    return registry;
  }

  private async instructionsOf(def: AgentDefinition): Promise<string> {
    const parts = [def.instructions];
    for (const skill of def.skills) {
      const body = await this.opts.skills?.loadBody(skill);
      parts.push(body ? `## Skill: ${skill}\n\n${body}` : `(The skill "${skill}" is not installed.)`);
    }
    return parts.join("\n\n");
  }

  private delegatePrompt(agent: PreparedAgent): string {
    const now = (this.opts.now ?? (() => new Date()))();
    return `# Agent: ${agent.name}

${agent.instructions}

## How you work here
The main assistant called you to do one task; your final reply goes back to it as the result. You cannot message the user and nobody will answer questions: make reasonable assumptions and say which ones you made. Never claim to have done something you did not do.

## Tools
${agent.tools.names.length ? agent.tools.names.join(", ") : "(none)"}

## Workspace
Your workspace is ${this.opts.workspace}. Relative paths in file tools start there.

Current time: ${formatLocalTime(now)}`;
  }

  private model(model: string | undefined): string | undefined {
    return model && this.opts.modelName ? this.opts.modelName(model) : model;
  }
}
