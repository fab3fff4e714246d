/**
 * `palaver doctor [--json] [--fix]`: checks what breaks installations, one line each, OK / WARN /
 * FAIL with the fix in words; exit 1 when anything failed. It changes nothing unless --fix, which
 * only does the safe things doctor/fix.ts lists, and prints them first.
 */
import type { Command } from "commander";
import { configPathFor } from "../config/load.js";
import { stateDir } from "../config/paths.js";
import { runDoctor } from "../doctor/doctor.js";
import { safeFixes } from "../doctor/fix.js";
import type { CheckResult } from "../doctor/types.js";
import { configureLogging } from "../log.js";
import { commonOptions, guarded } from "./common.js";
import { serviceCheck } from "./doctor-service.js";

export function registerDoctorCommand(program: Command): void {
  const doctor = program
    .command("doctor")
    .description(
      "check this installation: Node, config, platform tokens, the LLM, sandbox, state folder, service, port, cluster database",
    )
    .option("--json", "print the checks as JSON")
    .option("--fix", "do the safe fixes (missing state folder, file modes 0700/0600), listed first")
    .action((opts: { json?: boolean; fix?: boolean }) =>
      guarded(async () => {
        const common = commonOptions(doctor);
        configureLogging({ verbose: common.verbose, level: "warn" });
        if (opts.fix) {
          const path = configPathFor({ configPath: common.config });
          const fixes = await safeFixes(stateDir(path), path);
          for (const fix of fixes) process.stdout.write(`fix: ${fix.what}\n`);
          for (const fix of fixes) await fix.apply();
          if (fixes.length === 0) process.stdout.write("fix: nothing to fix\n");
        }
        const results = await runDoctor({
          configPath: common.config,
          workspace: common.workspace,
          moreChecks: async (configPath) => [await serviceCheck(configPath)],
        });
        process.stdout.write(
          opts.json ? `${JSON.stringify(results, null, 2)}\n` : `${formatChecks(results)}\n`,
        );
        if (results.some((r) => r.status === "fail")) process.exitCode = 1;
      }),
    );
}

/** Pure: the lines doctor prints. */
export function formatChecks(results: readonly CheckResult[]): string {
  const width = Math.max(...results.map((r) => r.name.length));
  return results
    .map((r) => {
      const line = `${r.status.toUpperCase().padEnd(4)}  ${r.name.padEnd(width)}  ${r.detail}`;
      return r.fix ? `${line}\n      ${" ".repeat(width)}  → ${r.fix}` : line;
    })
    .join("\n");
}
