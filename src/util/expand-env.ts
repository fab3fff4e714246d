/**
 * `${VAR}` references in MCP server env and headers and in exec's env, filled
 * from palaver's own environment so secrets can live in .env instead of
 * config.json. Pure.
 */

const REF = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

export interface Expanded<T> {
  value: T;
  /** Variables that were referenced but not set (each once, in order); they expand to "". */
  missing: string[];
}

/** Replaces every `${NAME}` with env[NAME]; anything else (`$NAME`, `${1X}`) is left as written. */
export function expandEnvRefs(text: string, env: NodeJS.ProcessEnv): Expanded<string> {
  const missing: string[] = [];
  const value = text.replace(REF, (_ref, name: string) => {
    const v = env[name];
    if (v === undefined) {
      if (!missing.includes(name)) missing.push(name);
      return "";
    }
    return v;
  });
  return { value, missing };
}

/** expandEnvRefs over the values of a record (keys are kept as written). */
export function expandEnvRecord(
  record: Readonly<Record<string, string>>,
  env: NodeJS.ProcessEnv,
): Expanded<Record<string, string>> {
  const value: Record<string, string> = {};
  const missing: string[] = [];
  for (const [key, text] of Object.entries(record)) {
    const one = expandEnvRefs(text, env);
    // defineProperty: a header or variable literally named "__proto__" stays an own key.
    Object.defineProperty(value, key, {
      value: one.value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
    for (const name of one.missing) if (!missing.includes(name)) missing.push(name);
  }
  return { value, missing };
}
