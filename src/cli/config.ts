/** `palaver config check` and `palaver config schema`. */
import type { Command } from "commander";
import { configJsonSchema } from "../config/load.js";
import { approvalRuleProblems } from "../approvals/policy.js";
import { platformProblems } from "../channels/registry.js";
import { maskSecrets } from "../config/secrets.js";
import { describeProviderChoice, formatProviderChoice } from "../llm/provider-report.js";
import { resolveProvider } from "../llm/providers.js";
import { ConfigError } from "../util/errors.js";
import { agentStatus } from "./agents.js";
import { addCommonOptions, exitOnConfigError, exitOnRefusedConfig, loadForCli } from "./common.js";

export function registerConfigCommand(program: Command): Command {
  const config = program.command("config").description("check the configuration or print its JSON Schema");

  const check = config
    .command("check")
    .description(
      "validate the config the way `palaver gateway` and `palaver chat` do (exit 78 where they would " +
        "refuse it); print the verdict, the LLM chosen and the warnings (broken agent files among them)",
    )
    .option("--print", "also print the effective configuration (secrets masked)")
    .action(async (opts: { print?: boolean }, cmd: Command) => {
      // An invalid config never returns from loadForCli: it prints every problem and exits 78, as
      // it does for every command.
      const loaded = loadForCli(cmd, { logWarnings: false });
      // The gateway and chat resolve the provider with this same function and refuse to start
      // when it throws: the same error, printed the same way.
      try {
        resolveProvider(loaded.config);
      } catch (err) {
        if (err instanceof ConfigError) exitOnRefusedConfig(err);
        throw err;
      }
      // Valid JSON of the right types can still not work (an enabled platform without its token):
      // reported the same way, so a script or a person sees one kind of failure.
      const problems = [
        ...platformProblems(loaded.config),
        ...approvalRuleProblems(loaded.config.tools.approval),
      ];
      if (problems.length > 0) {
        exitOnConfigError(new ConfigError(`invalid configuration in ${loaded.path}`, problems), loaded.path);
      }
      const llm = describeProviderChoice(loaded.config);
      // A broken agent file is left out and the other agents still load, so it warns rather than
      // refuses: the same problems `palaver agents check` lists (path:line, or the config path).
      const agents = await agentStatus(loaded);
      const warnings = [...loaded.warnings, ...llm.warnings, ...agents.problems];
      const out = [
        warnings.length > 0 ? "Configuration is valid, with warnings (below)." : "Configuration is valid.",
        loaded.exists
          ? `Config: ${loaded.path}`
          : `Config: (no config file, defaults) [looked for ${loaded.path}]`,
        `Workspace: ${loaded.workspace}`,
        `LLM: ${formatProviderChoice(llm)}`,
      ];
      if (warnings.length > 0) {
        out.push(`Warnings (${warnings.length}):`);
        for (const w of warnings) out.push(`  - ${w}`);
      }
      if (opts.print) {
        out.push("Effective configuration (secrets masked):");
        out.push(JSON.stringify(maskSecrets(loaded.config), null, 2));
      }
      process.stdout.write(`${out.join("\n")}\n`);
    });
  addCommonOptions(check);

  const schema = config
    .command("schema")
    .description("print the JSON Schema of config.json (for editor completion)")
    .action(() => {
      process.stdout.write(`${JSON.stringify(configJsonSchema(), null, 2)}\n`);
    });
  addCommonOptions(schema);

  return config;
}
