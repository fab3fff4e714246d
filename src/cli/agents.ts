/** `palaver agents list|check`: the named agents of the workspace, what each may use, and problems. */
import type { Command } from "commander";
import { AgentDirectory } from "../agent/agents/directory.js";
import { agentLines, agentProblems, type ProblemInputs, type ReportInputs } from "../agent/agents/report.js";
import { SkillsLoader } from "../agent/skills.js";
import { createDefaultTools, createWorkerTools } from "../agent/tools/index.js";
import { builtinSkillsDir } from "../config/paths.js";
import type { LoadedConfig } from "../config/load.js";
import { logger } from "../log.js";
import { addCommonOptions, loadForCli } from "./common.js";

/** Tools the agent registers beside the default set (create-agent.ts). */
const EXTRA_TOOLS = ["spawn", "delegate", "ask_human", "cron"];

/** What the problems are checked against: the files, the bindings and the installed skills. */
async function problemInputs(loaded: LoadedConfig): Promise<ProblemInputs> {
  const { config, workspace } = loaded;
  const [catalog, skills] = await Promise.all([
    // Silent: every command here prints the problems itself, so the log would only repeat them.
    new AgentDirectory(workspace, logger("agents").child({}, { level: "silent" })).catalog(),
    new SkillsLoader(workspace, builtinSkillsDir()).list(),
  ]);
  return { catalog, bindings: config.agents.bindings, skills: skills.map((s) => s.name) };
}

/** Also the tools each agent may use (building the tool sets logs the tools' own config warnings). */
async function inputsFor(loaded: LoadedConfig): Promise<ReportInputs> {
  const { config, workspace } = loaded;
  return {
    ...(await problemInputs(loaded)),
    workerTools: createWorkerTools(config, workspace).names,
    allTools: [...createDefaultTools(config, workspace).names, ...EXTRA_TOOLS],
  };
}

/** For `palaver status` and `palaver config check`: the agents' names and every problem. */
export async function agentStatus(loaded: LoadedConfig): Promise<{ names: string[]; problems: string[] }> {
  const inputs = await problemInputs(loaded);
  return { names: [...inputs.catalog.agents.keys()], problems: agentProblems(inputs) };
}

export function registerAgentsCommand(program: Command): void {
  const agents = program.command("agents").description("named agents (<workspace>/agents/<name>.md)");

  const list = agents
    .command("list")
    .description("list the named agents and what each may use")
    .action(async (_opts: unknown, cmd: Command) => {
      const inputs = await inputsFor(loadForCli(cmd, { level: "warn", logWarnings: false }));
      const problems = agentProblems(inputs);
      const lines = [...agentLines(inputs), ...(problems.length ? ["", "Problems:", ...problems] : [])];
      process.stdout.write(`${lines.join("\n")}\n`);
    });
  addCommonOptions(list);

  const check = agents
    .command("check")
    .description("check the agent files and agents.bindings (exit 1 on a problem)")
    .action(async (_opts: unknown, cmd: Command) => {
      const inputs = await inputsFor(loadForCli(cmd, { level: "error", logWarnings: false }));
      const problems = agentProblems(inputs);
      if (problems.length) {
        process.stdout.write(`${problems.join("\n")}\n`);
        process.exitCode = 1;
        return;
      }
      process.stdout.write(`${inputs.catalog.agents.size} agent(s), no problems.\n`);
    });
  addCommonOptions(check);
}
