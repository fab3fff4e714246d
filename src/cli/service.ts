/**
 * `palaver service install [--user] [--run-as NAME] [--dry-run] [--force] [--yes]`: renders the
 * systemd unit (systemd/palaver.service) with this machine's absolute paths, writes it where
 * systemd looks, and prints the systemctl commands to run next. It never starts anything
 * itself: enabling a daemon is the user's decision, made with the printed commands.
 *
 * The service must see what `palaver status` sees in this shell: keys that live only in the
 * current folder's `.env` are copied into the state folder's (after a question, or --yes),
 * and a unit whose gateway would stop at once (bad config, no usable provider) is refused, as is
 * one no systemd manager would run (no systemd, no user bus) unless --force.
 *
 * PALAVER_SYSTEMD_DIR, when set, replaces the folder the unit is written to (tests, and
 * packaging into a staging root).
 */
import { existsSync, readFileSync } from "node:fs";
import { chmod, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { homedir, userInfo } from "node:os";
import { createInterface } from "node:readline/promises";
import { dirname, join } from "node:path";
import type { Command } from "commander";
import { loadConfig } from "../config/load.js";
import { stateDir } from "../config/paths.js";
import { packageRoot } from "../util/package-root.js";
import { resolveProvider } from "../llm/providers.js";
import { ConfigError, PalaverError } from "../util/errors.js";
import { addCommonOptions, loadForCli } from "./common.js";
import { copyIntoStateEnv, planServiceEnv, type EnvPlan } from "./service-env.js";
import { noManagerMessage, probeSystemd, rootUserUnitNote } from "./service-systemd.js";

export const UNIT_NAME = "palaver.service";

/** What the template's placeholders stand for. */
export interface UnitValues {
  /** @NODE@: the node executable. */
  node: string;
  /** @ENTRY@: palaver's compiled entry, dist/main.js. */
  entry: string;
  /** @CONFIG@: the config file. */
  config: string;
  /** @STATE_DIR@: palaver's own state (the config's folder): writable, and the working directory. */
  stateDir: string;
  /** @WORKSPACE@: the agent's workspace: writable. */
  workspace: string;
  /** @USER@: the account a system unit runs as (unused in user units). */
  user: string;
  /** @PATH@: $PATH of the service (tool commands and MCP servers find node and npx in it). */
  path: string;
}

const PLACEHOLDERS: Record<string, keyof UnitValues> = {
  NODE: "node",
  ENTRY: "entry",
  CONFIG: "config",
  STATE_DIR: "stateDir",
  WORKSPACE: "workspace",
  USER: "user",
  PATH: "path",
};

/**
 * Checks a value can go into a unit file. `"`, `'`, `\` and `$` would need escaping that
 * differs between settings (ExecStart= expands $VAR, others do not), so they are refused
 * rather than escaped wrongly; spaces and `%` are handled by unitWord.
 */
function checkValue(key: keyof UnitValues, value: string): void {
  const what = `${key} ${JSON.stringify(value)}`;
  if (value === "") throw new PalaverError(`cannot write the unit: ${key} is empty`);
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x1f\x7f"'\\$]/.test(value)) {
    throw new PalaverError(
      `cannot write the unit: ${what} contains a quote, backslash, $ or control character, ` +
        "which systemd unit files cannot take unescaped; move it, or write the unit by hand",
    );
  }
  if (key === "user") {
    if (!/^[A-Za-z0-9_][A-Za-z0-9_.@-]*$/.test(value)) {
      throw new PalaverError(`cannot write the unit: ${what} is not a valid account name`);
    }
  } else if (key !== "path" && !value.startsWith("/")) {
    throw new PalaverError(`cannot write the unit: ${what} is not an absolute path`);
  }
}

/** `%` starts a systemd specifier (%h, %u, ...) in nearly every setting: a literal one is `%%`. */
function escapeSpecifiers(value: string): string {
  return value.replaceAll("%", "%%");
}

/** One word of a setting that splits on whitespace (ExecStart=, ReadWritePaths=, Environment=). */
function unitWord(value: string): string {
  const escaped = escapeSpecifiers(value);
  return /\s/.test(escaped) ? `"${escaped}"` : escaped;
}

/**
 * The unit text for this machine: placeholders replaced, "#[system] " lines kept only for
 * system units and "#[user] " lines only for user units, "##" template notes dropped.
 * Throws PalaverError on a value a unit file cannot hold and on an unknown placeholder.
 */
export function renderUnit(template: string, values: UnitValues, options: { user: boolean }): string {
  for (const key of Object.values(PLACEHOLDERS)) checkValue(key, values[key]);
  const out: string[] = [];
  for (const templateLine of template.split(/\r?\n/)) {
    if (templateLine.startsWith("##")) continue;
    let line = templateLine;
    const marker = /^#\[(system|user)\] ?/.exec(line);
    if (marker) {
      if ((marker[1] === "user") !== options.user) continue;
      line = line.slice(marker[0].length);
    }
    // Comments are for people: the plain value. WorkingDirectory= takes the rest of the line
    // as the path (no quote removal): specifiers escaped only. Everything else: one word.
    const comment = /^\s*#/.test(line);
    const wholeLine = /^\s*WorkingDirectory=/.test(line);
    line = line.replace(/@([A-Z_]+)@/g, (whole, name: string) => {
      const key = PLACEHOLDERS[name];
      if (key === undefined) throw new PalaverError(`the unit template has an unknown placeholder ${whole}`);
      const value = values[key];
      if (comment) return value;
      return wholeLine ? escapeSpecifiers(value) : unitWord(value);
    });
    out.push(line);
  }
  return `${out
    .join("\n")
    .replace(/^\n+/, "")
    .replace(/\n{3,}/g, "\n\n")
    .trimEnd()}\n`;
}

/** $PATH for the service: node's own folder first (nvm and the like), then the usual ones. */
export function servicePath(node: string): string {
  const dirs = [dirname(node), "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"];
  return [...new Set(dirs.filter((d) => !d.includes(":")))].join(":");
}

/** Where systemd reads units from: the user's ~/.config/systemd/user or /etc/systemd/system. */
export function unitDir(options: { user: boolean; env?: NodeJS.ProcessEnv; home?: string }): string {
  const env = options.env ?? process.env;
  if (env.PALAVER_SYSTEMD_DIR) return env.PALAVER_SYSTEMD_DIR;
  if (!options.user) return "/etc/systemd/system";
  const configHome = env.XDG_CONFIG_HOME?.startsWith("/")
    ? env.XDG_CONFIG_HOME
    : join(options.home ?? homedir(), ".config");
  return join(configHome, "systemd", "user");
}

/**
 * The account the service runs as. A user unit runs as whoever installs it. A system unit:
 * --run-as, else the user who ran sudo, else the current user; root only when asked for by
 * name, since the whole point of the unit is an unprivileged daemon.
 */
export function resolveRunAs(options: {
  user: boolean;
  runAs?: string;
  currentUser: string;
  env?: NodeJS.ProcessEnv;
}): string {
  const env = options.env ?? process.env;
  if (options.user) {
    if (options.runAs !== undefined) {
      throw new PalaverError(
        "--run-as is for system units; a user unit (--user) always runs as the user who installs it",
      );
    }
    return options.currentUser;
  }
  if (options.runAs !== undefined) return options.runAs;
  const sudoUser = env.SUDO_USER;
  const name =
    options.currentUser === "root" && sudoUser && sudoUser !== "root" ? sudoUser : options.currentUser;
  if (name === "root") {
    throw new PalaverError(
      "A system unit would run palaver as root, which this command does not write. Choose one: " +
        "a system unit that runs palaver as an ordinary account (--run-as USER: one that can read the " +
        "config and owns the workspace), or a user unit for root's own user manager (--user).",
    );
  }
  return name;
}

export interface InstallFacts {
  user: boolean;
  values: UnitValues;
  currentUser: string;
  home: string;
  configExists: boolean;
  /** Tells whether a path exists (injected so the check stays pure). */
  exists: (path: string) => boolean;
}

/** Things that would make the service fail or surprise, said before it is started. */
export function installWarnings(facts: InstallFacts): string[] {
  const { values, exists } = facts;
  const warnings: string[] = [];
  if (!facts.configExists) {
    warnings.push(
      `there is no config file at ${values.config}: the service would run on defaults with no ` +
        "channels; run `palaver onboard` first (or pass --config)",
    );
  }
  if (!exists(values.entry)) {
    warnings.push(
      `${values.entry} does not exist yet: run \`npm run build\` in ${dirname(dirname(values.entry))} ` +
        "before starting the service",
    );
  }
  if (!exists(values.stateDir)) {
    warnings.push(
      `the state folder ${values.stateDir} does not exist: systemd cannot start the service in it`,
    );
  }
  if (!facts.user && !exists(values.workspace)) {
    warnings.push(
      `the workspace ${values.workspace} does not exist: a system unit cannot create it (ProtectSystem=strict ` +
        `allows writes only inside existing folders); run \`palaver onboard\` as ${values.user} first`,
    );
  }
  if (!facts.user && values.user !== facts.currentUser && values.config.startsWith(`${facts.home}/`)) {
    warnings.push(
      `the config is in ${facts.currentUser}'s home (${values.config}) but the service runs as ${values.user}: ` +
        `check that ${values.user} can read it, or pass --config with the path of ${values.user}'s config`,
    );
  }
  return warnings;
}

/** The commands to run after writing the unit, one per line (comments start with #). */
export function nextCommands(options: {
  user: boolean;
  runAs: string;
  replaced: boolean;
  root: boolean;
}): string[] {
  if (options.user) {
    return [
      "systemctl --user daemon-reload",
      options.replaced
        ? `systemctl --user restart ${UNIT_NAME}`
        : `systemctl --user enable --now ${UNIT_NAME}`,
      `systemctl --user status ${UNIT_NAME}   # is it running?`,
      `journalctl --user -u ${UNIT_NAME} -f   # follow its logs`,
      `loginctl enable-linger ${options.runAs}   # start at boot and keep running after you log out`,
    ];
  }
  const sudo = options.root ? "" : "sudo ";
  return [
    `${sudo}systemctl daemon-reload`,
    options.replaced ? `${sudo}systemctl restart ${UNIT_NAME}` : `${sudo}systemctl enable --now ${UNIT_NAME}`,
    `systemctl status ${UNIT_NAME}   # is it running?`,
    `journalctl -u ${UNIT_NAME} -f   # follow its logs`,
  ];
}

function errnoCode(err: unknown): string | undefined {
  return err instanceof Error && "code" in err && typeof err.code === "string" ? err.code : undefined;
}

/** Writes the unit; only replaces an existing file when `replace` (then atomically). */
async function writeUnit(target: string, text: string, replace: boolean, user: boolean): Promise<void> {
  const tmp = `${target}.tmp-${process.pid}`;
  try {
    await mkdir(dirname(target), { recursive: true });
    if (replace) {
      await writeFile(tmp, text);
      await chmod(tmp, 0o644);
      await rename(tmp, target);
    } else {
      // "wx": created only if absent, so a unit that appeared meanwhile is not clobbered.
      await writeFile(target, text, { flag: "wx" });
      await chmod(target, 0o644);
    }
  } catch (err) {
    const code = errnoCode(err);
    if (code === "EEXIST") {
      throw new PalaverError(`${target} appeared while writing; run again (with --force to replace it)`, {
        cause: err,
      });
    }
    if (code === "EACCES" || code === "EPERM" || code === "EROFS") {
      const hint = user
        ? "check the permissions of that folder"
        : "a system unit needs root: run the same command with sudo (sudo may need palaver's full " +
          'path: sudo "$(command -v palaver)" service install ...), or install a user unit with --user';
      throw new PalaverError(`cannot write ${target}: permission denied; ${hint}`, { cause: err });
    }
    throw new PalaverError(`cannot write ${target}: ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
    });
  } finally {
    await rm(tmp, { force: true }).catch(() => undefined);
  }
}

async function readIfExists(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    if (errnoCode(err) === "ENOENT") return undefined;
    throw new PalaverError(`cannot read ${path}`, { cause: err });
  }
}

/**
 * Why `palaver gateway` would stop at once when started with only `env` (the service's
 * environment, no shell variables), or undefined when it would start: a config that does
 * not validate, or no provider it can use.
 */
function serviceStartProblem(options: {
  configPath: string;
  workspace: string;
  stateDir: string;
  env: Record<string, string>;
}): string | undefined {
  try {
    const loaded = loadConfig({
      configPath: options.configPath,
      workspace: options.workspace,
      env: { ...options.env },
      cwd: options.stateDir,
      loadDotenv: false,
    });
    resolveProvider(loaded.config);
    return undefined;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    // A validation error's message is only the file; its problems say what is wrong.
    return err.message.startsWith("invalid configuration")
      ? `${err.message}: ${err.problems.join("; ")}`
      : err.message;
  }
}

const names = (keys: string[]) => keys.join(", ");

/** The refusal when the service would not start, with what the shell has that the service lacks. */
function refusal(problem: string, plan: EnvPlan, dryRun: boolean): PalaverError {
  const shellOnly =
    plan.shellOnly.length === 0
      ? ""
      : ` (${names(plan.shellOnly)} ${plan.shellOnly.length === 1 ? "is" : "are"} set in this shell, ` +
        `which the service does not see: put ${plan.shellOnly.length === 1 ? "it" : "them"} in ${plan.stateEnvFile})`;
  return new PalaverError(
    `the service would not start, so ${dryRun ? "no unit is printed" : "no unit was written"}: ${problem}${shellOnly}`,
  );
}

/** Asks on the terminal; false when there is none to ask on. */
async function confirm(question: string): Promise<boolean> {
  if (!process.stdin.isTTY || !process.stderr.isTTY) return false;
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await rl.question(`${question} [y/N] `)).trim());
  } finally {
    rl.close();
  }
}

/** Copies the current folder's keys into the state folder's `.env`, if the user agrees (or --yes). */
async function carryOverEnv(plan: EnvPlan, yes: boolean): Promise<void> {
  const keys = Object.keys(plan.toCopy);
  if (keys.length === 0) return;
  const what = `${names(keys)} from ${plan.cwdEnvFile} into ${plan.stateEnvFile}`;
  if (!yes && !(await confirm(`The service reads only ${plan.stateEnvFile}. Copy ${what}?`))) {
    throw new PalaverError(
      `${names(keys)} ${keys.length === 1 ? "is" : "are"} set only in ${plan.cwdEnvFile}, which the service ` +
        `does not read; nothing was written. Run again with --yes to copy ${what} (mode 0600), ` +
        "or copy them yourself",
    );
  }
  await copyIntoStateEnv(plan);
  process.stdout.write(`Copied ${what} (mode 0600).\n`);
}

interface InstallOptions {
  user?: boolean;
  runAs?: string;
  dryRun?: boolean;
  force?: boolean;
  yes?: boolean;
}

async function install(opts: InstallOptions, cmd: Command): Promise<void> {
  // The shell's own variables, before loading the config adds the .env files' to process.env.
  const shellEnv = { ...process.env };
  // Only warnings from loading the config: the output of this command is the unit and the steps.
  const loaded = loadForCli(cmd, { level: "warn" });
  const user = opts.user === true;
  const currentUser = userInfo().username;
  const home = homedir();
  const runAs = resolveRunAs({ user, runAs: opts.runAs, currentUser });
  const node = process.execPath;
  const values: UnitValues = {
    node,
    entry: join(packageRoot(), "dist", "main.js"),
    config: loaded.path,
    stateDir: stateDir(loaded.path),
    workspace: loaded.workspace,
    user: runAs,
    path: servicePath(node),
  };
  const plan = planServiceEnv({ stateDir: values.stateDir, cwd: process.cwd(), shellEnv });
  const problem = serviceStartProblem({
    configPath: values.config,
    workspace: values.workspace,
    stateDir: values.stateDir,
    env: plan.serviceEnv,
  });
  if (problem !== undefined) throw refusal(problem, plan, opts.dryRun === true);
  const template = readFileSync(join(packageRoot(), "systemd", UNIT_NAME), "utf8");
  const unit = renderUnit(template, values, { user });
  const target = join(unitDir({ user, home }), UNIT_NAME);

  const warnings = installWarnings({
    user,
    values,
    currentUser,
    home,
    configExists: loaded.exists,
    exists: existsSync,
  });
  for (const key of plan.shellOnly) {
    warnings.push(
      `${key} is set in this shell only: the service will not see it (put it in ${plan.stateEnvFile})`,
    );
  }
  for (const w of warnings) process.stderr.write(`warning: ${w}\n`);

  const existing = await readIfExists(target);
  const root = process.getuid?.() === 0;
  if (root && user) process.stderr.write(`note: ${rootUserUnitNote()}\n`);
  // A unit nothing will run only misleads (its systemctl steps fail). Into PALAVER_SYSTEMD_DIR
  // (a staging root for another machine) this machine's systemd does not matter.
  const noManager = process.env.PALAVER_SYSTEMD_DIR ? undefined : await probeSystemd(user);
  if (noManager !== undefined) {
    const forced = opts.force === true;
    if (!forced && !opts.dryRun) {
      throw new PalaverError(noManagerMessage({ user, detail: noManager, forced }));
    }
    process.stderr.write(`warning: ${noManagerMessage({ user, detail: noManager, forced })}\n`);
  }
  const steps = (replaced: boolean) =>
    nextCommands({ user, runAs, replaced, root })
      .map((c) => `  ${c}\n`)
      .join("");

  if (opts.dryRun) {
    // stdout is the unit alone, so `--dry-run > palaver.service` gives a usable file.
    process.stdout.write(unit);
    const note =
      existing === undefined
        ? ""
        : existing === unit
          ? " (it is already up to date)"
          : " (it exists: --force replaces it)";
    const keys = Object.keys(plan.toCopy);
    const copy =
      keys.length === 0
        ? ""
        : `Would copy ${names(keys)} from ${plan.cwdEnvFile} into ${plan.stateEnvFile} (asks first; --yes copies without asking). `;
    process.stderr.write(
      `# dry run: nothing written. ${copy}Would write ${target}${note}; then run:\n${steps(existing !== undefined)}`,
    );
    return;
  }
  if (existing !== undefined && existing !== unit && !opts.force) {
    throw new PalaverError(
      `${target} already exists and differs from the unit palaver would write; ` +
        "--dry-run prints the new one, --force replaces the file",
    );
  }
  await carryOverEnv(plan, opts.yes === true);
  if (existing === unit) {
    process.stdout.write(`${target} is already up to date. To (re)start it:\n${steps(true)}`);
    return;
  }
  await writeUnit(target, unit, existing !== undefined, user);
  const who = user
    ? `Your user manager will run palaver as ${runAs}`
    : `systemd will run palaver as ${runAs}`;
  process.stdout.write(
    `${existing === undefined ? "Wrote" : "Replaced"} ${target}. ${who} once you run:\n${steps(existing !== undefined)}`,
  );
}

export function registerServiceCommand(program: Command): void {
  const service = program.command("service").description("run palaver as a systemd service");
  const cmd = service
    .command("install")
    .description("write the systemd unit for `palaver gateway` and print the systemctl commands to enable it")
    .option("--user", "a user unit (~/.config/systemd/user, systemctl --user) instead of a system unit")
    .option("--run-as <name>", "system unit: the account to run as (default: you, or the user who ran sudo)")
    .option("--dry-run", "print the unit to stdout and write nothing")
    .option("--force", "replace an existing unit file; write it even when no systemd manager is running")
    .option("--yes", "copy keys found only in ./.env into the state folder's .env without asking")
    .action(async (opts: InstallOptions, command: Command) => {
      try {
        await install(opts, command);
      } catch (err) {
        if (!(err instanceof PalaverError)) throw err;
        process.stderr.write(`palaver: ${err.message}\n`);
        process.exitCode = 1;
      }
    });
  addCommonOptions(cmd);
}
