/**
 * The environment palaver gives the programs it starts (exec commands, MCP
 * stdio servers): an allow-list, never its own environment minus a few names.
 * palaver's environment holds provider keys, channel tokens, PALAVER_*
 * settings and whatever .env loaded; a child sees none of it unless the user
 * lists it explicitly (tools.exec.env, an MCP server's env).
 */
import { delimiter } from "node:path";

/** Variables passed through from palaver's environment when set. */
const PASSED = ["PATH", "HOME", "LANG", "TZ", "TERM"] as const;
/** Locale variables (LC_ALL, LC_CTYPE, ...) are passed through too. */
const LOCALE = /^LC_[A-Z_]+$/;

export interface ChildEnvOptions {
  /** Appended to PATH when non-empty (tools.exec.pathAppend). */
  pathAppend?: string;
  /** Replaces HOME (exec gives commands the workspace as their home). */
  home?: string;
  /** Added last, so the user's own list wins (tools.exec.env, mcpServers.NAME.env). */
  extra?: Record<string, string>;
}

/** The allow-listed environment for a child process, built from `base` (palaver's own environment). */
export function childEnv(base: NodeJS.ProcessEnv, opts: ChildEnvOptions = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(base)) {
    if (value === undefined || !isPassed(name)) continue;
    // A bash exported function (`() { ...`) is code, not a setting (Shellshock).
    if (value.startsWith("()")) continue;
    env[name] = value;
  }
  if (opts.home !== undefined) env.HOME = opts.home;
  if (opts.pathAppend) env.PATH = env.PATH ? `${env.PATH}${delimiter}${opts.pathAppend}` : opts.pathAppend;
  return { ...env, ...opts.extra };
}

function isPassed(name: string): boolean {
  return (PASSED as readonly string[]).includes(name) || LOCALE.test(name);
}
