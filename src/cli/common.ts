/**
 * Glue shared by every command: the common options and loading the config the
 * way every command does (logging set up, secrets registered with the log
 * redactor, warnings logged, a bad config reported by path with exit code 78).
 */
import { existsSync } from "node:fs";
import type { Command } from "commander";
import { configPathFor, loadConfig, type LoadedConfig } from "../config/load.js";
import { secretValues } from "../config/secrets.js";
import { configureLogging, logger, registerSecrets } from "../log.js";
import { ConfigError, errorMessage, EXIT_CONFIG } from "../util/errors.js";

export interface CommonOptions {
  config?: string;
  workspace?: string;
  verbose?: boolean;
}

/** Adds --config, --workspace and --verbose (once; calling it again is harmless). */
export function addCommonOptions(cmd: Command): Command {
  const has = (flag: string) => cmd.options.some((o) => o.long === flag);
  if (!has("--config")) {
    cmd.option("--config <path>", "config file (default: $PALAVER_CONFIG, else ~/.palaver/config.json)");
  }
  if (!has("--workspace")) cmd.option("--workspace <path>", "workspace folder (overrides the config)");
  if (!has("--verbose")) cmd.option("--verbose", "debug logging");
  return cmd;
}

/** The common options given to this command or any command above it. */
export function commonOptions(cmd: Command): CommonOptions {
  const all = cmd.optsWithGlobals<Record<string, unknown>>();
  const str = (v: unknown) => (typeof v === "string" ? v : undefined);
  return { config: str(all.config), workspace: str(all.workspace), verbose: all.verbose === true };
}

/** Prints a ConfigError the way every command does and exits with EX_CONFIG (78). */
export function exitOnConfigError(err: ConfigError, path: string): never {
  const lines = err.problems.length > 0 ? err.problems : [err.message];
  process.stderr.write(
    `palaver: invalid configuration in ${path}:\n${lines.map((l) => `  ${l}\n`).join("")}`,
  );
  // process.exit rather than a thrown sentinel: it works whatever the caller does with the
  // rejection, and stderr to a pipe or file is written synchronously on Linux.
  process.exit(EXIT_CONFIG);
}

/**
 * Prints a ConfigError thrown after loading (no usable LLM provider, a channel or sandbox that
 * cannot work) and exits 78: the CLI's last catch prints it this way for gateway and chat, and
 * `config check` calls the same, so the two say the same words.
 */
export function exitOnRefusedConfig(err: ConfigError): never {
  process.stderr.write(`palaver: ${err.message}\n${err.problems.map((p) => `  ${p}\n`).join("")}`);
  process.exit(EXIT_CONFIG);
}

export interface LoadForCliOptions {
  /** Log each config warning with logger("config").warn (default true). */
  logWarnings?: boolean;
  /** Log level without --verbose (default "info"); the terminal chat only wants warnings. */
  level?: string;
}

/**
 * Sets up logging and loads the config; a bad config, or a --config path that does not exist,
 * ends the process with exit code 78.
 */
export function loadForCli(cmd: Command, options: LoadForCliOptions = {}): LoadedConfig {
  const opts = commonOptions(cmd);
  configureLogging({ verbose: opts.verbose, level: options.level });
  // Only the default path may be absent (a first run); a path typed on purpose and missing is a
  // mistake (a typo, the wrong folder), not a reason to run on defaults.
  if (opts.config !== undefined) {
    const path = configPathFor({ configPath: opts.config });
    if (!existsSync(path)) {
      process.stderr.write(
        `palaver: config file ${path} (given with --config) does not exist; ` +
          `create it with \`palaver onboard --config ${path}\`\n`,
      );
      process.exit(EXIT_CONFIG);
    }
  }
  let loaded: LoadedConfig;
  try {
    loaded = loadConfig({ configPath: opts.config, workspace: opts.workspace });
  } catch (err) {
    if (err instanceof ConfigError) exitOnConfigError(err, configPathFor({ configPath: opts.config }));
    throw err;
  }
  registerSecrets(secretValues(loaded.config));
  if (options.logWarnings ?? true) {
    const log = logger("config");
    for (const warning of loaded.warnings) log.warn(warning);
  }
  return loaded;
}

/** Runs a command's action: a failure is one line on stderr and exit code 1, not a stack trace. */
export async function guarded(fn: () => void | Promise<void>): Promise<void> {
  try {
    await fn();
  } catch (err) {
    process.stderr.write(`palaver: ${errorMessage(err)}\n`);
    process.exitCode = 1;
  }
}
