/**
 * What the environment adds to the config file: `.env` files (beside the
 * config and in the working directory) and `PALAVER_SECTION__KEY__SUBKEY`
 * variables that override single keys.
 */
import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { parse as parseDotenv } from "dotenv";
import type { z } from "zod";
import { ConfigError } from "../util/errors.js";
import { ConfigSchema } from "./schema.js";
import { defOf, formatPath, isPlainObject, setOwn, unwrap, type Json, type Schema } from "./schema-walk.js";

const ENV_PREFIX = "PALAVER_";

/** Loads KEY=VALUE files into env; the first file wins, and variables already set are never replaced. */
export function loadDotenvFiles(paths: string[], env: NodeJS.ProcessEnv): void {
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

/** Schema keys compared case-insensitively, ignoring single underscores (and dashes in record keys). */
const fold = (key: string) => key.toLowerCase().replace(/[_-]/g, "");

/**
 * Applies PALAVER_A__B__C variables to `raw` in place. Returns dotted path → variable
 * name, so a validation problem can say which variable set the bad value.
 */
export function applyEnvOverrides(
  raw: Json,
  env: NodeJS.ProcessEnv,
  warnings: string[],
): Map<string, string> {
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
