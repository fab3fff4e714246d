/**
 * nanobot (pydantic, populate_by_name) accepts camelCase and snake_case keys
 * alike, so snake_case keys are renamed to their camelCase schema key before
 * validation; keys the schema does not know are warned about (with the known
 * key they are nearest to, when one is a likely typo) and dropped.
 */
import { didYouMean } from "../util/did-you-mean.js";
import {
  defOf,
  formatPath,
  isPlainObject,
  setOwn,
  type Json,
  type PathKey,
  type Schema,
} from "./schema-walk.js";

const camelCase = (key: string) => key.replace(/_+([a-zA-Z0-9])/g, (_m, c: string) => c.toUpperCase());

/**
 * Copy of `value` with snake_case object keys renamed to their camelCase schema key,
 * and keys the schema does not know dropped with a warning each. Record keys
 * (provider names, header names) are kept as they are.
 */
export function normalizeKeys(value: unknown, schema: Schema, path: PathKey[], warnings: string[]): unknown {
  const def = defOf(schema);
  if (def.type === "object" && isPlainObject(value)) {
    const shape = def.shape;
    const out: Json = {};
    for (const [key, v] of Object.entries(value)) {
      const name = Object.hasOwn(shape, key) ? key : camelCase(key);
      if (!Object.hasOwn(shape, name)) {
        const near = didYouMean(name, Object.keys(shape));
        const hint = near === undefined ? "" : `; did you mean ${near}?`;
        warnings.push(`unknown key ${formatPath([...path, key])} (ignored${hint})`);
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
