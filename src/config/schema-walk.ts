/**
 * Walking the config schema and the raw JSON side by side, by path: what the
 * key normalizer, the environment overrides and the problem messages share.
 */
import type { z } from "zod";
import { ConfigSchema } from "./schema.js";

export type Schema = z.core.$ZodType;
export type Json = Record<string, unknown>;
export type PathKey = string | number;

/** Strips default/prefault/optional/nullable/pipe wrappers; reports whether null is accepted. */
export function unwrap(schema: Schema): { schema: Schema; nullable: boolean } {
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

export function defOf(schema: Schema): z.core.$ZodTypes["_zod"]["def"] {
  return (unwrap(schema).schema as z.core.$ZodTypes)._zod.def;
}

/** The schema of the value at `path` in the config, if the path exists in it. */
export function schemaAt(path: readonly PropertyKey[]): Schema | undefined {
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

/** `a.b[0]["odd key"]`, the way every message names a config path. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const key of path) {
    if (typeof key === "number") out += `[${key}]`;
    else if (typeof key === "string" && /^[A-Za-z_$][\w$-]*$/.test(key)) out += out === "" ? key : `.${key}`;
    else out += `[${JSON.stringify(String(key))}]`;
  }
  return out === "" ? "(top level)" : out;
}

export function isPlainObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Assignment that is safe for keys such as "__proto__" coming from a JSON file. */
export function setOwn(target: Json, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}
