/**
 * What `palaver agents list|check` and `palaver status` say about the named agents: each agent,
 * what it may use, and the problems (broken files, bindings or skills naming what does not
 * exist). Pure: a catalog and the config's names in, lines out.
 */
import { globToRegExp } from "../../util/glob.js";
import type { AgentDefinition } from "./definition.js";
import { formatProblem } from "./definition.js";
import type { AgentCatalog } from "./directory.js";
import type { AgentBinding } from "./routing.js";

/** What the problems are found in. */
export interface ProblemInputs {
  catalog: AgentCatalog;
  bindings: readonly AgentBinding[];
  /** Installed skills. */
  skills: readonly string[];
}

export interface ReportInputs extends ProblemInputs {
  /** Built-in tool names an agent without `tools` gets (the subagent set). */
  workerTools: readonly string[];
  /** Every built-in tool name (MCP tools are not known offline). */
  allTools: readonly string[];
}

/** The built-in tools `def` may use, and its patterns that match none (MCP globs, typically). */
export function toolsOf(
  def: AgentDefinition,
  inputs: Pick<ReportInputs, "workerTools" | "allTools">,
): string {
  if (!def.tools) return `${inputs.workerTools.join(", ")} (the default set)`;
  return def.tools
    .map((p) => {
      const re = globToRegExp(p);
      const hits = inputs.allTools.filter((t) => re.test(t));
      return hits.length === 1 && hits[0] === p
        ? p
        : `${p} (${hits.length ? hits.join(", ") : "MCP tools, if any"})`;
    })
    .join(", ");
}

export function agentLines(inputs: ReportInputs): string[] {
  const agents = [...inputs.catalog.agents.values()];
  if (agents.length === 0) return ["No named agents (add <workspace>/agents/<name>.md files)."];
  return agents.flatMap((a) => [
    `${a.name} — ${a.description}`,
    `  file: ${a.path}`,
    `  model: ${a.model ?? "the utility model (a delegate or background task), else the main model"}`,
    `  tools: ${toolsOf(a, inputs)}`,
    ...(a.maxIterations ? [`  maxIterations: ${a.maxIterations}`] : []),
    ...(a.skills.length ? [`  skills: ${a.skills.join(", ")}`] : []),
  ]);
}

/** Every problem, one line each (`path:line: what`, or the config path). */
export function agentProblems(inputs: ProblemInputs): string[] {
  const { agents, problems } = inputs.catalog;
  const out = problems.map(formatProblem);
  inputs.bindings.forEach((b, i) => {
    if (!agents.has(b.agent)) out.push(`agents.bindings[${i}].agent: there is no agent named "${b.agent}"`);
  });
  for (const a of agents.values()) {
    for (const skill of a.skills) {
      if (!inputs.skills.includes(skill)) out.push(`${a.path}: skills: there is no skill named "${skill}"`);
    }
  }
  return out;
}
