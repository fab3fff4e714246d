import * as z from "zod";
import type { ToolCall, ToolDefinition } from "../../llm/types.js";
import { errorMessage } from "../../util/errors.js";
import type { Tool, ToolContext } from "./types.js";

/** Holds the tools of one agent and runs calls against them safely. */
export class ToolRegistry {
  private readonly tools = new Map<string, Tool>();
  /** The definitions as last built: one array while the tools stay the same (its token count is cached by identity). */
  private builtDefinitions: readonly ToolDefinition[] | undefined;
  /** What a call to an unknown tool is told (the tool directory when tiers are on); default: every name. */
  unknownToolHelp: (() => string | null) | undefined;

  register(tool: Tool): void {
    if (this.tools.has(tool.name)) throw new Error(`tool ${tool.name} registered twice`);
    this.tools.set(tool.name, tool);
    this.builtDefinitions = undefined;
  }

  unregister(name: string): void {
    if (this.tools.delete(name)) this.builtDefinitions = undefined;
  }

  has(name: string): boolean {
    return this.tools.has(name);
  }

  /** The tool itself (a named agent's registry is made of the tools its file allows). */
  get(name: string): Tool | undefined {
    return this.tools.get(name);
  }

  /** True when the tool may run alongside the other such calls of one model response (Tool.parallel). */
  runsInParallel(name: string): boolean {
    return this.tools.get(name)?.parallel === true;
  }

  get names(): string[] {
    return [...this.tools.keys()];
  }

  /** The MCP server a tool comes from (Tool.group), if any. */
  groupOf(name: string): string | undefined {
    return this.tools.get(name)?.group;
  }

  /** How a replayed turn treats this tool's calls (unknown tools count as side-effecting). */
  replayPolicy(name: string): { readOnly: boolean; replayNote?: string } {
    const tool = this.tools.get(name);
    return { readOnly: tool?.readOnly === true, replayNote: tool?.replayNote };
  }

  /** Where this call's output comes from when the tool declares it untrusted (Tool.untrustedSource), else null. */
  untrustedSource(call: ToolCall, ctx: ToolContext): string | null {
    const tool = this.tools.get(call.name);
    if (!tool?.untrustedSource) return null;
    const parsed = tool.parameters.safeParse(call.arguments);
    return parsed.success ? tool.untrustedSource(parsed.data, ctx) : null;
  }

  definitions(): readonly ToolDefinition[] {
    this.builtDefinitions ??= [...this.tools.values()].map(toDefinition);
    return this.builtDefinitions;
  }

  /** Runs one call. Never throws: every failure becomes text for the model. */
  async execute(call: ToolCall, ctx: ToolContext): Promise<string> {
    const tool = this.tools.get(call.name);
    if (!tool) {
      const help = this.unknownToolHelp?.() ?? `Available tools: ${this.names.join(", ")}.`;
      return `Error: there is no tool named "${call.name}". ${help}`;
    }
    if (call.argumentsError) {
      return `Error: the arguments for ${call.name} were not valid JSON (${call.argumentsError}). Call the tool again with a JSON object.`;
    }
    const parsed = tool.parameters.safeParse(call.arguments);
    if (!parsed.success) {
      return `Error: invalid arguments for ${call.name}: ${formatIssues(parsed.error)}`;
    }
    try {
      return await tool.execute(parsed.data, ctx);
    } catch (err) {
      if (ctx.signal.aborted) throw err;
      return `Error: ${errorMessage(err)}`;
    }
  }
}

function formatIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => `${issue.path.length ? issue.path.join(".") : "(arguments)"}: ${issue.message}`)
    .join("; ");
}

const definitionCache = new WeakMap<Tool, ToolDefinition>();

function toDefinition(tool: Tool): ToolDefinition {
  let def = definitionCache.get(tool);
  if (!def) {
    const schema = z.toJSONSchema(tool.parameters, { io: "input", unrepresentable: "any" });
    delete schema.$schema;
    def = {
      type: "function",
      function: { name: tool.name, description: tool.description, parameters: schema },
    };
    definitionCache.set(tool, def);
  }
  return def;
}
