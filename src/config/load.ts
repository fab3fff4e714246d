/**
 * Loading the configuration: schema defaults < config file < environment.
 *
 * The file is nanobot's config.json shape. nanobot (pydantic, populate_by_name)
 * accepts camelCase and snake_case keys alike, so snake_case keys are renamed
 * to their camelCase schema key before validation. Keys the schema does not
 * know are warned about by their dotted path and dropped. Environment
 * variables `PALAVER_SECTION__KEY__SUBKEY` override single keys. Every
 * validation problem is reported at once, as "path: expected X, got Y".
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { parse as parseDotenv } from "dotenv";
import { z } from "zod";
import { ConfigError } from "../util/errors.js";
import { expandHome } from "./paths.js";
import { ConfigSchema, defaultConfig, type Config } from "./schema.js";
import { isSecretPath } from "./secrets.js";
import { maskUrlCredentials } from "../util/url-credentials.js";

// Masking moved to secrets.ts; re-exported so existing importers keep working.
export { maskSecrets, secretValues } from "./secrets.js";

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

type Schema = z.core.$ZodType;
type Json = Record<string, unknown>;

const ENV_PREFIX = "PALAVER_";

// ---------------------------------------------------------------------------
// Entry point

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

  const result = ConfigSchema.safeParse(raw, { reportInput: true });
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
 * What `palaver onboard` writes and config.example.json holds: every default,
 * plus one empty provider entry so a newcomer sees the shape of one.
 */
export function exampleConfig(): Json {
  return {
    ...defaultConfig(),
    providers: { openai: { apiKey: "", apiBase: null, extraHeaders: null } },
  };
}

/** JSON Schema of the config file (input side: defaults are optional), for editor completion. */
export function configJsonSchema(): Json {
  return z.toJSONSchema(ConfigSchema, { io: "input" });
}

// ---------------------------------------------------------------------------
// .env files

/** Loads KEY=VALUE files into env; the first file wins, and variables already set are never replaced. */
function loadDotenvFiles(paths: string[], env: NodeJS.ProcessEnv): void {
  // dotenv.parse rather than dotenv.config: parse never prints (config() can be made to
  // print to stdout via DOTENV_CONFIG_QUIET/DEBUG, which would corrupt `config schema`).
  const seen = new Set<string>();
  for (const p of paths) {
    const file = resolve(p);
    if (seen.has(file) || !existsSync(file)) continue;
    seen.add(file);
    let parsed: Record<string, string>;
    try {
      parsed = parseDotenv(readFileSync(file, "utf8"));
    } catch (err) {
      throw new ConfigError(`cannot read ${file}`, [`${file}: cannot be read`], { cause: err });
    }
    for (const [key, value] of Object.entries(parsed)) if (env[key] === undefined) env[key] = value;
  }
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

function lineColumn(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset);
  const line = before.split("\n").length;
  const column = offset - (before.lastIndexOf("\n") + 1) + 1;
  return { line, column };
}

/**
 * The offset and reason of the first JSON syntax error, or undefined if the text
 * is valid. V8's messages only sometimes carry a position, so we find it ourselves.
 */
export function findJsonError(text: string): { offset: number; reason: string } | undefined {
  let i = 0;
  class Stop extends Error {
    constructor(readonly reason: string) {
      super(reason);
    }
  }
  const fail = (reason: string): never => {
    // Running out of text mid-value is what happened, whatever was expected next.
    throw new Stop(
      i >= text.length && !reason.startsWith("unterminated") ? "unexpected end of file" : reason,
    );
  };
  const unexpected = (): never => fail(`unexpected character ${JSON.stringify(text[i])}`);
  const ws = () => {
    while (i < text.length && " \t\n\r".includes(text[i]!)) i++;
  };
  const literal = /true|false|null|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
  const str = () => {
    i++; // opening quote
    for (;;) {
      if (i >= text.length) fail("unterminated string");
      const c = text[i]!;
      if (c === '"') return void i++;
      if (c === "\\") {
        const e = text[i + 1];
        if (e !== undefined && '"\\/bfnrt'.includes(e)) i += 2;
        else if (e === "u" && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) i += 6;
        else fail("invalid escape in string");
      } else if (c.charCodeAt(0) < 0x20) fail("line break or control character inside a string");
      else i++;
    }
  };
  const value = (depth: number): void => {
    if (depth > 512) fail("nested too deeply");
    ws();
    const c = text[i];
    if (c === "{" || c === "[") {
      const close = c === "{" ? "}" : "]";
      i++;
      ws();
      if (text[i] === close) return void i++;
      for (;;) {
        if (c === "{") {
          ws();
          if (text[i] !== '"') fail("expected a property name in double quotes");
          str();
          ws();
          if (text[i] !== ":") fail("expected ':' after the property name");
          i++;
        }
        value(depth + 1);
        ws();
        if (text[i] === ",") {
          i++;
          ws();
          if (text[i] === close) fail(`trailing comma before '${close}'`);
          continue;
        }
        if (text[i] === close) return void i++;
        fail(`expected ',' or '${close}'`);
      }
    }
    if (c === '"') return str();
    literal.lastIndex = i;
    const m = literal.exec(text);
    if (!m) unexpected();
    else i += m[0].length;
  };
  try {
    value(0);
    ws();
    if (i < text.length) fail("unexpected content after the end of the JSON value");
    return undefined;
  } catch (err) {
    if (err instanceof Stop) return { offset: Math.min(i, text.length), reason: err.reason };
    throw err;
  }
}

// ---------------------------------------------------------------------------
// Walking the raw input against the schema

/** Strips default/prefault/optional/nullable/pipe wrappers; reports whether null is accepted. */
function unwrap(schema: Schema): { schema: Schema; nullable: boolean } {
  let s = schema;
  let nullable = false;
  for (let n = 0; n < 32; n++) {
    const def = (s as z.core.$ZodTypes)._zod.def;
    if (
      def.type === "default" ||
      def.type === "prefault" ||
      def.type === "optional" ||
      def.type === "nonoptional" ||
      def.type === "readonly" ||
      def.type === "catch"
    ) {
      s = def.innerType;
    } else if (def.type === "nullable") {
      nullable = true;
      s = def.innerType;
    } else if (def.type === "pipe") {
      // z.preprocess(fn, schema) is a pipe from a transform: the shape lives on the out side.
      s = (def.in as z.core.$ZodTypes)._zod.def.type === "transform" ? def.out : def.in;
    } else if (def.type === "lazy") {
      s = def.getter();
    } else {
      break;
    }
  }
  return { schema: s, nullable };
}

function defOf(schema: Schema): z.core.$ZodTypes["_zod"]["def"] {
  return (unwrap(schema).schema as z.core.$ZodTypes)._zod.def;
}

const camelCase = (key: string) => key.replace(/_+([a-zA-Z0-9])/g, (_m, c: string) => c.toUpperCase());

/**
 * Copy of `value` with snake_case object keys renamed to their camelCase schema key,
 * and keys the schema does not know dropped with a warning each. Record keys
 * (provider names, header names) are kept as they are.
 */
function normalizeKeys(value: unknown, schema: Schema, path: PathKey[], warnings: string[]): unknown {
  const def = defOf(schema);
  if (def.type === "object" && isPlainObject(value)) {
    const shape = def.shape;
    const out: Json = {};
    for (const [key, v] of Object.entries(value)) {
      const name = Object.hasOwn(shape, key) ? key : camelCase(key);
      if (!Object.hasOwn(shape, name)) {
        warnings.push(`unknown key ${formatPath([...path, key])} (ignored)`);
        continue;
      }
      if (name !== key && Object.hasOwn(value, name)) {
        warnings.push(`both ${formatPath([...path, key])} and ${name} are set; using ${name}`);
        continue;
      }
      setOwn(out, name, normalizeKeys(v, shape[name]!, [...path, name], warnings));
    }
    return out;
  }
  if (def.type === "record" && isPlainObject(value)) {
    const out: Json = {};
    for (const [key, v] of Object.entries(value)) {
      setOwn(out, key, normalizeKeys(v, def.valueType, [...path, key], warnings));
    }
    return out;
  }
  if (def.type === "array" && Array.isArray(value)) {
    return value.map((v, i) => normalizeKeys(v, def.element, [...path, i], warnings));
  }
  return value;
}

// ---------------------------------------------------------------------------
// Environment overrides

/** Schema keys compared case-insensitively, ignoring single underscores (and dashes in record keys). */
const fold = (key: string) => key.toLowerCase().replace(/[_-]/g, "");

/**
 * Applies PALAVER_A__B__C variables to `raw` in place. Returns dotted path → variable
 * name, so a validation problem can say which variable set the bad value.
 */
function applyEnvOverrides(raw: Json, env: NodeJS.ProcessEnv, warnings: string[]): Map<string, string> {
  const sources = new Map<string, string>();
  const topLevel = Object.keys(ConfigSchema.shape).map(fold);
  for (const name of Object.keys(env).sort()) {
    const value = env[name];
    if (!name.startsWith(ENV_PREFIX) || value === undefined) continue;
    const rest = name.slice(ENV_PREFIX.length);
    if (!rest.includes("__")) {
      // PALAVER_CONFIG, PALAVER_LOG_LEVEL ... are not overrides; PALAVER_AGENTS_DEFAULTS_MODEL is a typo of one.
      const first = rest.split("_")[0] ?? "";
      if (topLevel.includes(fold(first)) && rest.length > first.length) {
        warnings.push(`environment variable ${name} is ignored: separate levels with double underscores`);
      }
      continue;
    }
    const target = resolveEnvPath(rest.split("__"), raw);
    if (!target) {
      warnings.push(`environment variable ${name} names no config key (ignored)`);
      continue;
    }
    if (!setPath(raw, target.path, parseEnvValue(value, target.leaf))) {
      warnings.push(`environment variable ${name} is ignored: ${formatPath(target.path)} is not an object`);
      continue;
    }
    sources.set(formatPath(target.path), name);
  }
  return sources;
}

function resolveEnvPath(segments: string[], raw: Json): { path: string[]; leaf: Schema } | undefined {
  let schema: Schema = ConfigSchema;
  let node: unknown = raw;
  const path: string[] = [];
  for (const segment of segments) {
    if (segment === "") return undefined;
    const def = defOf(schema);
    let key: string | undefined;
    if (def.type === "object") {
      key = Object.keys(def.shape).find((k) => fold(k) === fold(segment));
      if (key === undefined) return undefined;
      schema = def.shape[key]!;
    } else if (def.type === "record") {
      // An entry already in the file wins (so OPENROUTER reaches "openRouter"); a new one is lowercased.
      const existing = isPlainObject(node) ? Object.keys(node) : [];
      key =
        existing.find((k) => k.toLowerCase() === segment.toLowerCase()) ??
        existing.find((k) => fold(k) === fold(segment)) ??
        segment.toLowerCase();
      schema = def.valueType;
    } else {
      return undefined;
    }
    path.push(key);
    node = isPlainObject(node) ? node[key] : undefined;
  }
  return { path, leaf: schema };
}

/**
 * Env values are JSON when they parse as JSON, else strings; but a string field keeps
 * the text as typed (an API key of digits stays a string), and a list field also
 * takes comma-separated values (PALAVER_CHANNELS__TELEGRAM__ALLOW_FROM=123,456).
 */
function parseEnvValue(text: string, leaf: Schema): unknown {
  const { schema, nullable } = unwrap(leaf);
  const type = (schema as z.core.$ZodTypes)._zod.def.type;
  let parsed: unknown = text;
  let isJson = true;
  try {
    parsed = JSON.parse(text);
  } catch {
    isJson = false;
  }
  if (type === "string" || type === "enum") {
    if (isJson && (typeof parsed === "string" || (nullable && parsed === null))) return parsed;
    return text;
  }
  if (type === "array" && !(isJson && Array.isArray(parsed))) {
    return text.trim() === ""
      ? []
      : text
          .split(",")
          .map((s) => s.trim())
          .filter((s) => s !== "");
  }
  return parsed;
}

function setPath(root: Json, path: string[], value: unknown): boolean {
  let node = root;
  for (const key of path.slice(0, -1)) {
    const next = node[key];
    if (next === undefined || next === null) {
      const child: Json = {};
      setOwn(node, key, child);
      node = child;
    } else if (isPlainObject(next)) {
      node = next;
    } else {
      return false;
    }
  }
  setOwn(node, path[path.length - 1]!, value);
  return true;
}

// ---------------------------------------------------------------------------
// Problems

type PathKey = string | number;

function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const key of path) {
    if (typeof key === "number") out += `[${key}]`;
    else if (typeof key === "string" && /^[A-Za-z_$][\w$-]*$/.test(key)) out += out === "" ? key : `.${key}`;
    else out += `[${JSON.stringify(String(key))}]`;
  }
  return out === "" ? "(top level)" : out;
}

const TYPE_NAMES: Record<string, string> = {
  string: "a string",
  number: "a number",
  int: "an integer",
  boolean: "true or false",
  object: "an object",
  record: "an object",
  array: "a list",
  null: "null",
};

function describeValue(value: unknown, secret = false): string {
  if (value === undefined) return "nothing";
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  if (typeof value === "object") return "an object";
  if (secret) return `a ${typeof value} (hidden)`;
  if (typeof value === "string") {
    const shown = maskUrlCredentials(value, "****");
    return JSON.stringify(shown.length > 60 ? `${shown.slice(0, 57)}...` : shown);
  }
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return `a ${typeof value}`;
}

function schemaAt(path: readonly PropertyKey[]): Schema | undefined {
  let schema: Schema = ConfigSchema;
  for (const key of path) {
    const def = defOf(schema);
    if (def.type === "object" && typeof key === "string" && Object.hasOwn(def.shape, key)) {
      schema = def.shape[key]!;
    } else if (def.type === "record") schema = def.valueType;
    else if (def.type === "array") schema = def.element;
    else return undefined;
  }
  return schema;
}

function expectedOf(issue: z.core.$ZodIssue): string | undefined {
  if (issue.code === "invalid_type") return TYPE_NAMES[issue.expected] ?? issue.expected;
  if (issue.code === "invalid_value") {
    return issue.values.length === 1
      ? JSON.stringify(issue.values[0])
      : `one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}`;
  }
  if (issue.code === "too_small" || issue.code === "too_big") {
    const small = issue.code === "too_small";
    const bound = small ? issue.minimum : issue.maximum;
    const op = small ? (issue.inclusive ? ">=" : ">") : issue.inclusive ? "<=" : "<";
    if (issue.origin === "number" || issue.origin === "int") return `a number ${op} ${bound}`;
    const unit = issue.origin === "string" ? "characters" : "items";
    return `${small ? "at least" : "at most"} ${bound} ${unit}`;
  }
  if (issue.code === "invalid_union") {
    const branches = issue.errors.map((branch) => (branch.length === 1 ? expectedOf(branch[0]!) : undefined));
    if (branches.length === 0 || branches.some((b) => b === undefined)) return undefined;
    return [...new Set(branches)].join(" or ");
  }
  // Other issue kinds (formats, custom checks) carry a good enough message of their own.
  return undefined;
}

function describeIssue(issue: z.core.$ZodIssue, envPaths: Map<string, string>): string {
  const path = formatPath(issue.path);
  const secret = isSecretPath(issue.path);
  let expected = expectedOf(issue);
  let text: string;
  if (expected) {
    const schema = schemaAt(issue.path);
    if (schema && unwrap(schema).nullable && issue.code !== "too_small" && issue.code !== "too_big") {
      expected += " or null";
    }
    text = `${path}: expected ${expected}, got ${describeValue(issue.input, secret)}`;
  } else {
    text = `${path}: ${issue.message}`;
  }
  // The value may have come from an environment variable at this path or above it.
  for (let n = issue.path.length; n > 0; n--) {
    const source = envPaths.get(formatPath(issue.path.slice(0, n)));
    if (source) return `${text} (from ${source})`;
  }
  return text;
}

// ---------------------------------------------------------------------------
// Small helpers

function isPlainObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Assignment that is safe for keys such as "__proto__" coming from a JSON file. */
function setOwn(target: Json, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === "" ? undefined : value;
}
