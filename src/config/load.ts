/**
 * Loading the configuration: schema defaults < config file < environment.
 *
 * The file is nanobot's config.json shape; snake_case keys are renamed and
 * unknown ones warned about (keys.ts), `.env` files and PALAVER_* variables
 * are applied (env.ts), and every validation problem is reported at once, as
 * "path: expected X, got Y" (issues.ts); broken JSON by line and column
 * (json-errors.ts).
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import * as z from "zod";
import { ConfigError } from "../util/errors.js";
import { applyEnvOverrides, loadDotenvFiles } from "./env.js";
import { describeIssue, describeValue } from "./issues.js";
import { findJsonError, lineColumn } from "./json-errors.js";
import { normalizeKeys } from "./keys.js";
import { expandHome } from "./paths.js";
import { ConfigSchema, defaultConfig, type Config } from "./schema.js";
import { isPlainObject, type Json } from "./schema-walk.js";

export interface LoadConfigOptions {
  /** --config; else $PALAVER_CONFIG, else ~/.palaver/config.json. Relative paths resolve against cwd. */
  configPath?: string;
  /** --workspace; overrides agents.defaults.workspace. Relative paths resolve against cwd. */
  workspace?: string;
  /** Read for PALAVER_* overrides; .env files are loaded into it. Defaults to process.env. */
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Load `.env` beside the config file and in cwd into `env` (default true). */
  loadDotenv?: boolean;
}

export interface LoadedConfig {
  config: Config;
  /** Absolute path of the config file (whether or not it exists). */
  path: string;
  exists: boolean;
  warnings: string[];
  /** Absolute, ~ expanded; also written back into config.agents.defaults.workspace. */
  workspace: string;
}

// ---------------------------------------------------------------------------
// Loading

/** The config path loadConfig would use for these options (the CLI prints it on errors). */
export function configPathFor(opts: Pick<LoadConfigOptions, "configPath" | "env" | "cwd"> = {}): string {
  const env = opts.env ?? process.env;
  const explicit = opts.configPath ?? nonEmpty(env.PALAVER_CONFIG);
  return expandHome(explicit ?? "~/.palaver/config.json", opts.cwd ?? process.cwd());
}

export function loadConfig(opts: LoadConfigOptions = {}): LoadedConfig {
  const env = opts.env ?? process.env;
  const cwd = opts.cwd ?? process.cwd();
  const path = configPathFor({ configPath: opts.configPath, env, cwd });
  const explicit = opts.configPath !== undefined || nonEmpty(env.PALAVER_CONFIG) !== undefined;
  const warnings: string[] = [];

  if (opts.loadDotenv ?? true) loadDotenvFiles([join(dirname(path), ".env"), join(cwd, ".env")], env);

  const file = readConfigFile(path);
  if (!file.exists && explicit) warnings.push(`config file ${path} does not exist; using defaults`);
  if (file.exists && file.empty) warnings.push(`config file ${path} is empty; using defaults`);

  const raw = normalizeKeys(file.data, ConfigSchema, [], warnings) as Json;
  const envPaths = applyEnvOverrides(raw, env, warnings);

  // jitless: parsed once, so zod compiling a fast path for each object schema (new Function) costs
  // start-up time and saves nothing. main.ts's z.config({ jitless }) comes too late for
  // ConfigSchema, which is built as its module loads, before main.ts's own code runs.
  const result = ConfigSchema.safeParse(raw, { reportInput: true, jitless: true });
  if (!result.success) {
    const problems = result.error.issues.map((issue) => describeIssue(issue, envPaths));
    throw new ConfigError(`invalid configuration in ${path}`, problems, { cause: result.error });
  }
  const config = result.data;
  // --workspace is relative to where the user typed it; a configured one to the config file,
  // so the daemon finds the same folder whatever its working directory.
  const workspace = opts.workspace
    ? expandHome(opts.workspace, cwd)
    : expandHome(config.agents.defaults.workspace, dirname(path));
  config.agents.defaults.workspace = workspace;
  return { config, path, exists: file.exists, warnings, workspace };
}

/**
 * What config.example.json holds: every default, plus one empty provider entry
 * so a newcomer sees the shape of one. (`palaver onboard` writes only what the user chose.)
 */
export function exampleConfig(): Json {
  const defaults = defaultConfig();
  // Left unset, as in a fresh config: "on while no other platform is", not a fixed true that
  // would keep the web chat on after a copy of the example enables Telegram.
  const { enabled: _auto, ...web } = defaults.channels.web;
  return {
    ...defaults,
    channels: { ...defaults.channels, web },
    providers: { openai: { apiKey: "", apiBase: null, extraHeaders: null } },
  };
}

/** JSON Schema of the config file (input side: defaults are optional), for editor completion. */
export function configJsonSchema(): Json {
  return z.toJSONSchema(ConfigSchema, { io: "input" });
}

// ---------------------------------------------------------------------------
// The file

function readConfigFile(path: string): { data: Json; exists: boolean; empty: boolean } {
  if (!existsSync(path)) return { data: {}, exists: false, empty: false };
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new ConfigError(`cannot read config file ${path}`, [`cannot read the file: ${why}`], {
      cause: err,
    });
  }
  text = text.replace(/^\uFEFF/, ""); // editors on Windows add a BOM; JSON.parse refuses it
  if (text.trim() === "") return { data: {}, exists: true, empty: true };
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    const located = findJsonError(text);
    const offset = located?.offset ?? text.length;
    const reason = located?.reason ?? (err instanceof Error ? err.message : "invalid JSON");
    const { line, column } = lineColumn(text, offset);
    const problem = `invalid JSON at line ${line}, column ${column}: ${reason}`;
    throw new ConfigError(`${path}:${line}:${column}: ${problem}`, [problem], { cause: err });
  }
  if (!isPlainObject(data)) {
    const problem = `the file must hold a JSON object ({ ... }), got ${describeValue(data)}`;
    throw new ConfigError(`invalid configuration in ${path}`, [problem]);
  }
  return { data, exists: true, empty: false };
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === "" ? undefined : value;
}
