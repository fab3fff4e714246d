/** `palaver config check` and `palaver config schema`. */
import type { Command } from "commander";
import { configJsonSchema } from "../config/load.js";
import { approvalRuleProblems } from "../approvals/policy.js";
import { platformProblems } from "../channels/registry.js";
import { maskSecrets } from "../config/secrets.js";
import { describeProviderChoice, formatProviderChoice } from "../llm/provider-report.js";
import { ConfigError } from "../util/errors.js";
import { addCommonOptions, exitOnConfigError, loadForCli } from "./common.js";

export function registerConfigCommand(program: Command): Command {
  const config = program.command("config").description("check the configuration or print its JSON Schema");

  const check = config
    .command("check")
    .description(
      "validate the config (types, and settings an enabled platform cannot work without); " +
        "print warnings and the effective config (secrets masked)",
    )
    .action((_opts: unknown, cmd: Command) => {
      // An invalid config never returns from loadForCli: it prints every problem and exits 78.
      const loaded = loadForCli(cmd, { logWarnings: false });
      // Valid JSON of the right types can still not work (an enabled platform without its token):
      // reported the same way, so a script or a person sees one kind of failure.
      const problems = [
        ...platformProblems(loaded.config),
        ...approvalRuleProblems(loaded.config.tools.approval),
      ];
      if (problems.length > 0) {
        exitOnConfigError(new ConfigError(`invalid configuration in ${loaded.path}`, problems), loaded.path);
      }
      const out: string[] = [];
      out.push(
        loaded.exists
          ? `Config: ${loaded.path}`
          : `Config: (no config file, defaults) [looked for ${loaded.path}]`,
      );
      out.push(`Workspace: ${loaded.workspace}`);
      const llm = describeProviderChoice(loaded.config);
      out.push(`LLM: ${formatProviderChoice(llm)}`);
      const warnings = [...loaded.warnings, ...llm.warnings];
      if (warnings.length > 0) {
        out.push(`Warnings (${warnings.length}):`);
        for (const w of warnings) out.push(`  - ${w}`);
      }
      out.push("Effective configuration (secrets masked):");
      out.push(JSON.stringify(maskSecrets(loaded.config), null, 2));
      out.push("Configuration is valid.");
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
