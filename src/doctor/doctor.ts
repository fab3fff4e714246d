/** `palaver doctor`'s checks in order, each independent of the others' outcome where it can be. */
import { approvalRuleProblems } from "../approvals/policy.js";
import { platformProblems } from "../channels/registry.js";
import { loadConfig, type LoadedConfig } from "../config/load.js";
import { stateDir } from "../config/paths.js";
import { runningGatewayPid } from "../daemon/lock.js";
import { logger } from "../log.js";
import { errorMessage } from "../util/errors.js";
import { ConfigError } from "../util/errors.js";
import { databaseChecks } from "./database.js";
import { llmChecks } from "./llm.js";
import { nodeCheck, portCheck, sandboxCheck, stateDirChecks } from "./local.js";
import { platformChecks } from "./platforms.js";
import { fail, ok, type CheckResult } from "./types.js";

export interface DoctorOptions {
  configPath?: string;
  workspace?: string;
  env?: NodeJS.ProcessEnv;
  /** Checks that live above this folder (the CLI's systemd unit), given the config file's path. */
  moreChecks?: (configPath: string) => Promise<CheckResult[]>;
}

export async function runDoctor(opts: DoctorOptions = {}): Promise<CheckResult[]> {
  const results = [nodeCheck()];
  let loaded: LoadedConfig;
  try {
    loaded = loadConfig({
      configPath: opts.configPath,
      workspace: opts.workspace,
      ...(opts.env ? { env: opts.env } : {}),
    });
  } catch (err) {
    const problems = err instanceof ConfigError ? err.problems : [];
    results.push(
      fail(
        "config",
        [errorMessage(err), ...problems].join("; "),
        "fix the lines named above in the config (`palaver config check` shows them)",
      ),
    );
    return results;
  }
  // The same checks `palaver config check` makes beyond the schema.
  const problems = [
    ...platformProblems(loaded.config),
    ...approvalRuleProblems(loaded.config.tools.approval),
  ];
  results.push(
    problems.length
      ? fail("config", problems.join("; "), "fix the settings named; `palaver config check` lists them")
      : ok(
          "config",
          loaded.exists ? `${loaded.path} is valid` : `no config file at ${loaded.path}: defaults`,
        ),
  );
  const state = stateDir(loaded.path);
  const gatewayPid = runningGatewayPid(state);
  const [platforms, llm, sandbox, stateFolder, service, port, database] = await Promise.all([
    problems.length ? Promise.resolve([]) : platformChecks(loaded.config),
    llmChecks(loaded.config),
    sandboxCheck(loaded.config, opts.env),
    stateDirChecks(state),
    opts.moreChecks?.(loaded.path) ?? Promise.resolve([]),
    portCheck(loaded.config, gatewayPid !== null),
    databaseChecks(loaded.config.cluster.database, logger("doctor")),
  ]);
  results.push(...platforms, ...llm, sandbox, ...stateFolder, ...service, port, ...database);
  return results;
}
