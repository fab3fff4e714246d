/**
 * Validation problems in plain words: "path: expected X, got Y", with secrets
 * hidden and the environment variable named when one set the bad value.
 */
import type { z } from "zod";
import { maskUrlCredentials } from "../util/url-credentials.js";
import { isSecretPath } from "./secrets.js";
import { formatPath, schemaAt, unwrap } from "./schema-walk.js";

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

/** A value as a problem message shows it: short, URL credentials masked, a secret hidden. */
export function describeValue(value: unknown, secret = false): string {
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

/** One zod issue as a line of `config check` output. */
export function describeIssue(issue: z.core.$ZodIssue, envPaths: Map<string, string>): string {
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
