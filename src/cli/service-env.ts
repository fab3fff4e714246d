/**
 * The environment a service would see, compared with the shell's. In a shell, palaver
 * reads the `.env` beside the config, the `.env` in the current folder and the shell's
 * own variables; the service reads only the first (its working directory is the state
 * folder, so "the current folder" is that same folder). `service install` uses this to
 * carry the current folder's keys over, and to check the config with what the service
 * will really have.
 */
import { existsSync, readFileSync } from "node:fs";
import { chown, stat } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { parse as parseDotenv } from "dotenv";
import { PalaverError } from "../util/errors.js";
import { replaceFilePrivate } from "../util/private-fs.js";

export interface EnvPlan {
  /** The state folder's `.env`, the one the service reads. */
  stateEnvFile: string;
  /** The current folder's `.env`, when it is another file and exists. */
  cwdEnvFile?: string;
  /** Variables of the current folder's `.env` the state folder's lacks: they must be copied. */
  toCopy: Record<string, string>;
  /** PALAVER_* overrides set in the shell itself, in neither file: the service will not see them. */
  shellOnly: string[];
  /** What the service reads: the state folder's `.env` plus what is to be copied. */
  serviceEnv: Record<string, string>;
}

function readDotenv(file: string): Record<string, string> {
  if (!existsSync(file)) return {};
  try {
    return parseDotenv(readFileSync(file, "utf8"));
  } catch (err) {
    throw new PalaverError(`cannot read ${file}: ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
    });
  }
}

/** `shellEnv` must be the environment as it was before any `.env` was loaded into it. */
export function planServiceEnv(options: {
  stateDir: string;
  cwd: string;
  shellEnv: NodeJS.ProcessEnv;
}): EnvPlan {
  const stateEnvFile = join(options.stateDir, ".env");
  const cwdFile = resolve(options.cwd, ".env");
  const cwdEnvFile = cwdFile !== resolve(stateEnvFile) && existsSync(cwdFile) ? cwdFile : undefined;
  const stateVars = readDotenv(stateEnvFile);
  const cwdVars = cwdEnvFile ? readDotenv(cwdEnvFile) : {};
  const toCopy = Object.fromEntries(Object.entries(cwdVars).filter(([key]) => !(key in stateVars)));
  const shellOnly = Object.keys(options.shellEnv)
    .filter((key) => key.startsWith("PALAVER_") && key.includes("__"))
    .filter((key) => !(key in stateVars) && !(key in cwdVars))
    .sort();
  return { stateEnvFile, cwdEnvFile, toCopy, shellOnly, serviceEnv: { ...cwdVars, ...stateVars } };
}

/**
 * One `KEY=value` line that dotenv reads back as exactly `value`: bare when it can be,
 * else in the first quotes that survive (dotenv turns `\n` into a newline inside "...").
 */
export function dotenvLine(key: string, value: string): string {
  const candidates = [value, `'${value}'`, `"${value}"`, `\`${value}\``];
  for (const candidate of candidates) {
    const line = `${key}=${candidate}`;
    if (parseDotenv(line)[key] === value) return line;
  }
  throw new PalaverError(
    `cannot copy ${key}: its value cannot be written in a .env file as it is; copy it by hand`,
  );
}

/**
 * Appends the variables to the state folder's `.env`, which ends up 0600 (it holds keys)
 * and, when root writes it (`sudo palaver service install`), owned by the state folder's
 * owner: a root-owned 0600 file is one the service account cannot read.
 */
export async function copyIntoStateEnv(plan: EnvPlan): Promise<void> {
  const lines = Object.entries(plan.toCopy).map(([key, value]) => dotenvLine(key, value));
  if (lines.length === 0) return;
  const before = existsSync(plan.stateEnvFile) ? readFileSync(plan.stateEnvFile, "utf8") : "";
  const separator = before === "" || before.endsWith("\n") ? "" : "\n";
  // A newline in the path must not end the comment and become a line dotenv reads.
  const from = (plan.cwdEnvFile ?? "the current folder").replace(/[\r\n]/g, " ");
  await replaceFilePrivate(
    plan.stateEnvFile,
    `${before}${separator}# copied from ${from} by \`palaver service install\`\n${lines.join("\n")}\n`,
  );
  if (process.getuid?.() === 0) {
    const owner = await stat(dirname(plan.stateEnvFile));
    await chown(plan.stateEnvFile, owner.uid, owner.gid);
  }
}
