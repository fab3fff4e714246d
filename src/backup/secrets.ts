/**
 * The config file as it goes into a backup without --include-secrets: every
 * secret value (config/secrets.ts decides which) replaced by "" and its path
 * listed, so the archive can be shared or stored without the keys and the
 * restore can say what to fill in.
 */
import { isSecretPath } from "../config/secrets.js";
import { maskUrlCredentials } from "../util/url-credentials.js";

export interface StrippedConfig {
  config: unknown;
  /** Dotted paths of the values removed (e.g. providers.openai.apiKey). */
  removed: string[];
}

export function stripSecrets(raw: unknown): StrippedConfig {
  const removed: string[] = [];
  const config = strip(raw, [], removed);
  return { config, removed };
}

function strip(value: unknown, path: string[], removed: string[]): unknown {
  if (typeof value === "string") {
    if (path.length > 0 && isSecretPath(path)) {
      if (value !== "") removed.push(path.join("."));
      return "";
    }
    const masked = maskUrlCredentials(value, "");
    if (masked !== value) removed.push(`${path.join(".")} (URL credentials)`);
    return masked;
  }
  if (Array.isArray(value)) return value.map((v, i) => strip(v, [...path, String(i)], removed));
  if (typeof value !== "object" || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    // defineProperty: a "__proto__" key from a JSON file stays a plain key.
    Object.defineProperty(out, key, {
      value: strip(v, [...path, key], removed),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}
