/**
 * Which config values are secrets, for `config check` (masked) and the log
 * redactor (registered by value). A secret is: a value under a key that names
 * one (apiKey, token, secret, password, authorization), every value of a
 * header or environment record (extraHeaders, headers, env: they carry
 * credentials under any name, e.g. GH_PAT or X-Key), and the credential part
 * of any URL (`http://user:pass@proxy`).
 */
import { maskUrlCredentials, urlCredentialSecrets } from "../util/url-credentials.js";
import type { Config } from "./schema.js";

type Json = Record<string, unknown>;

/** Keys whose values are secrets; anchored at the end so "maxTokens" is not one. */
export const SECRET_KEY = /(api_?key|token|secret|password|authorization)$/i;
/** Records whose every value is a secret: HTTP headers and child-process environments. */
export const SECRET_RECORDS = new Set(["extraHeaders", "headers", "env"]);

/** Whether the value at `path` (keys from the top) is a secret by its position. */
export function isSecretPath(path: readonly PropertyKey[]): boolean {
  const last = path[path.length - 1];
  const parent = path[path.length - 2];
  return (
    (typeof last === "string" && SECRET_KEY.test(last)) ||
    (typeof parent === "string" && SECRET_RECORDS.has(parent))
  );
}

function maskValue(value: string): string {
  if (value === "") return "(not set)";
  // Showing the last 4 of a short secret would give most of it away.
  return value.length >= 8 ? `****${value.slice(-4)}` : "****";
}

/**
 * Copy of `value` with every secret string replaced by visit(secret), and the
 * credentials inside other strings' URLs by visitUrl(text).
 */
function mapSecrets(
  value: unknown,
  visit: (secret: string) => string,
  visitUrl: (text: string) => string,
  secretHere = false,
): unknown {
  if (typeof value === "string") return secretHere ? visit(value) : visitUrl(value);
  if (Array.isArray(value)) return value.map((v) => mapSecrets(v, visit, visitUrl, secretHere));
  if (!isPlainObject(value)) return value;
  const out: Json = {};
  for (const [key, v] of Object.entries(value)) {
    let child: unknown;
    if (SECRET_RECORDS.has(key) && isPlainObject(v)) {
      const record: Json = {};
      for (const [k, rv] of Object.entries(v)) setOwn(record, k, mapSecrets(rv, visit, visitUrl, true));
      child = record;
    } else {
      child = mapSecrets(v, visit, visitUrl, SECRET_KEY.test(key));
    }
    setOwn(out, key, child);
  }
  return out;
}

/** Deep copy with keys, tokens, passwords, header and env values, and URL credentials masked. */
export function maskSecrets(config: Config): Config {
  return mapSecrets(config, maskValue, (text) => maskUrlCredentials(text, "****")) as Config;
}

/** Every non-empty secret value in the config, for the log redactor (registerSecrets). */
export function secretValues(config: Config): string[] {
  const found = new Set<string>();
  mapSecrets(
    config,
    (secret) => {
      if (secret !== "") found.add(secret);
      for (const part of urlCredentialSecrets(secret)) found.add(part);
      return secret;
    },
    (text) => {
      for (const part of urlCredentialSecrets(text)) found.add(part);
      return text;
    },
  );
  return [...found];
}

function isPlainObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Assignment that is safe for keys such as "__proto__" coming from a JSON file. */
function setOwn(target: Json, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}
