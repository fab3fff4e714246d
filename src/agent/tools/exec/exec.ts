/**
 * The `exec` tool: one shell command, with a timeout, a bounded output, an
 * allow-listed environment and, where bubblewrap works, a sandbox that shows
 * it only the workspace (sandbox.ts). Before anything runs, the guard
 * (workspace/exec-guard.ts, a seatbelt) refuses the obviously destructive and, without
 * the sandbox, restrictToWorkspace refuses commands naming paths outside the
 * workspace (paths.ts, best effort). Other chats' data (the sessions
 * folder, other chats' media) is hidden in the sandbox and, without it,
 * refused by name (chat-privacy.ts).
 */
import { stat } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import * as z from "zod";
import { resolveConfigPath, stateDir as stateDirOf } from "../../../config/paths.js";
import { logger, registerSecrets } from "../../../log.js";
import { expandEnvRecord } from "../../../util/expand-env.js";
import { childEnv } from "../../../util/child-env.js";
import { mkdirPrivate } from "../../../util/private-fs.js";
import { ConfigError, ToolError } from "../../../util/errors.js";
import { findDestructive } from "../../../workspace/exec-guard.js";
import { chatFolders, privateChatReason, type ChatFolders } from "../chat-privacy.js";
import { findOutsidePath, findPrivatePath } from "./paths.js";
import { runCommand, type RunResult } from "./run.js";
import { bwrapArgs, ExecSandbox, INSTALL_HINT, type SandboxState } from "./sandbox.js";
import { defineTool, type Tool } from "../types.js";
import { isInside, realPathLoose, resolveToolPath, type PathPolicy } from "../../../workspace/paths.js";

export { CappedText } from "./run.js";

export interface ExecToolOptions {
  workspace: string;
  restrictToWorkspace: boolean;
  timeoutSeconds: number;
  maxOutputChars: number;
  /** Appended to PATH when non-empty. */
  pathAppend: string;
  /** Extra regular expressions (strings, case-insensitive) of commands to refuse. */
  denyPatterns: string[];
  /** tools.exec.env: variables given to every command on top of the allow-list. */
  env?: Record<string, string>;
  /** Decides whether commands run in bubblewrap; one per agent, shared by its tools. Default: off. */
  sandbox?: ExecSandbox;
  /**
   * palaver's config file: its folder (the state folder) and the .env files
   * palaver reads are hidden from commands and protected by the guard.
   */
  configPath?: string;
  /** Milliseconds between SIGTERM and SIGKILL of the process group. */
  killGraceMs?: number;
}

const DEFAULT_KILL_GRACE_MS = 2000;
const log = logger("tool.exec");

export function createExecTool(opts: ExecToolOptions): Tool {
  const policy: PathPolicy = { workspace: opts.workspace, restrict: opts.restrictToWorkspace };
  const extraDeny = compileDenyPatterns(opts.denyPatterns);
  const sandbox = opts.sandbox ?? new ExecSandbox({ mode: "off", network: true });
  const extraEnv = expandExtraEnv(opts.env ?? {});
  const configPath = opts.configPath ?? resolveConfigPath();
  const stateDir = stateDirOf(configPath);
  // What palaver itself reads secrets from: the config and the state folder, .env beside it and in its working folder.
  const hidden = [stateDir, configPath, join(stateDir, ".env"), join(process.cwd(), ".env")];
  return defineTool({
    name: "exec",
    description:
      "Execute a shell command and return its output (stdout, stderr and exit code). Use with caution. " +
      `Commands time out after ${opts.timeoutSeconds} seconds. A command that starts something in the ` +
      "background must redirect its output (e.g. `cmd > log 2>&1 &`), or exec waits for it; in the " +
      "sandbox, background processes end when the command returns.",
    parameters: z.object({
      command: z.string().describe("The shell command to execute"),
      working_dir: z
        .string()
        .optional()
        .describe("Optional working directory for the command (defaults to the workspace)"),
    }),
    async execute({ command, working_dir }, ctx) {
      if (command.trim() === "") throw new ToolError("the command is empty");
      const workspace = await realPathLoose(opts.workspace);
      const cwd = await resolveToolPath(working_dir ?? ".", policy);
      const folders = await chatFolders(opts.workspace, ctx);
      const privateCwd = privateChatReason(await realPathLoose(cwd), working_dir ?? cwd, folders);
      if (privateCwd) throw new ToolError(privateCwd);
      const refusal =
        findDestructive(command, { home: homedir(), workspace, stateDir, cwd }) ??
        matchExtra(command, extraDeny);
      if (refusal) {
        throw new ToolError(
          `command refused by the safety guard (${refusal}). ` +
            "If it is really needed, ask the user to run it themselves.",
        );
      }
      const st = await stat(cwd).catch(() => null);
      if (!st?.isDirectory())
        throw new ToolError(`working_dir ${working_dir ?? cwd} is not an existing directory`);
      const state = await sandboxState(sandbox);
      const realCwd = await realPathLoose(cwd);
      // Every chat's data is hidden from the sandbox; the chat's own media folder is bound back in.
      const chatHidden = [folders.sessions, folders.media];
      if (state.sandboxed && !isInside(realCwd, workspace)) {
        throw new ToolError(
          `working_dir ${working_dir ?? cwd} is outside the workspace: sandboxed commands see only the ` +
            'workspace (tools.exec.sandbox; "off" runs them unconfined).',
        );
      }
      if (!state.sandboxed && opts.restrictToWorkspace) {
        const outside = findOutsidePath(command, workspace);
        if (outside) throw new ToolError(outsideMessage(outside, state));
      }
      if (!state.sandboxed) {
        const named = findPrivatePath(command, realCwd, folders);
        if (named) throw new ToolError(`command refused (${named})`);
      }
      // Unconfined and unrestricted, a command keeps the real home; otherwise the workspace is its home.
      const home = state.sandboxed || opts.restrictToWorkspace ? workspace : undefined;
      const env = childEnv(process.env, {
        pathAppend: opts.pathAppend,
        ...(home ? { home } : {}),
        extra: extraEnv,
      });
      const shell = ["/bin/sh", "-c", command] as const;
      const result = await runCommand({
        argv: state.sandboxed
          ? [
              state.bwrap,
              ...bwrapArgs({
                workspace,
                cwd: realCwd,
                network: state.network,
                hidden: [...hidden, ...chatHidden],
              }),
              ...(await ownMediaBind(folders)),
              "--",
              ...shell,
            ]
          : shell,
        cwd,
        env,
        timeoutMs: opts.timeoutSeconds * 1000,
        killGraceMs: opts.killGraceMs ?? DEFAULT_KILL_GRACE_MS,
        signal: ctx.signal,
        keepChars: opts.maxOutputChars,
      });
      return formatResult(result, opts.timeoutSeconds, opts.maxOutputChars, state.sandboxed);
    },
  });
}

/**
 * bwrap's arguments that show the chat's own media folder again under the
 * hidden media/ (bwrap mounts in order: this bind comes after the mask). The
 * folder is made first, so what a command writes there stays with the chat.
 */
async function ownMediaBind(folders: ChatFolders): Promise<string[]> {
  await mkdirPrivate(folders.ownMedia);
  return ["--bind", folders.ownMedia, folders.ownMedia];
}

/** The sandbox decision, with "require and unavailable" turned into a tool error (commands never run unconfined). */
async function sandboxState(sandbox: ExecSandbox): Promise<SandboxState> {
  try {
    return await sandbox.state();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    throw new ToolError(`exec is unavailable: ${err.problems.join("; ") || err.message}`, { cause: err });
  }
}

function outsideMessage(outside: string, state: SandboxState & { sandboxed: false }): string {
  const install = state.mode === "off" ? "" : `, or ${INSTALL_HINT} so commands run in a sandbox`;
  return (
    `command refused: it names ${outside}, outside the workspace. exec is not sandboxed ` +
    `(${state.reason}), so with tools.restrictToWorkspace a command may only name paths inside the ` +
    `workspace (absolute paths elsewhere, \`..\` and \`~\` are refused). Use paths inside the workspace${install}.`
  );
}

/**
 * tools.exec.env with `${VAR}` filled in from palaver's environment (as for
 * MCP servers), so a token can live in .env and still reach the one command
 * that needs it; the values are kept out of the logs.
 */
function expandExtraEnv(env: Record<string, string>): Record<string, string> {
  const expanded = expandEnvRecord(env, process.env);
  for (const name of expanded.missing)
    log.warn({ variable: name }, `tools.exec.env: \${${name}} is not set; using an empty value`);
  // Like an MCP server's env, every value counts as a secret: a token is the usual reason to list one.
  registerSecrets(Object.values(expanded.value));
  return expanded.value;
}

function compileDenyPatterns(patterns: string[]): RegExp[] {
  return patterns.map((p, i) => {
    try {
      return new RegExp(p, "i");
    } catch (err) {
      throw new ConfigError(
        "invalid tools.exec.denyPatterns",
        [`tools.exec.denyPatterns.${i}: not a valid regular expression: ${p}`],
        { cause: err },
      );
    }
  });
}

function matchExtra(command: string, patterns: RegExp[]): string | null {
  const hit = patterns.find((re) => re.test(command));
  return hit ? `matches the configured deny pattern /${hit.source}/` : null;
}

// ---------------------------------------------------------------- formatting

function formatResult(r: RunResult, timeoutSeconds: number, maxChars: number, sandboxed: boolean): string {
  const parts: string[] = [];
  const out = r.stdout.toString();
  const err = r.stderr.toString();
  if (out) parts.push(out.replace(/\n$/, ""));
  if (err) parts.push(`STDERR:\n${err.replace(/\n$/, "")}`);
  if (!out && !err) parts.push("(no output)");
  let body = capHeadTail(parts.join("\n"), maxChars);

  if (r.aborted) {
    body += "\n\nThe command was stopped (the turn was cancelled).";
  } else if (r.timedOut) {
    const unit = timeoutSeconds === 1 ? "second" : "seconds";
    // Only the sandbox's PID namespace reaches a process that left the process group (setsid, daemonize).
    const killed = sandboxed
      ? "was killed, with every process it started"
      : "was killed with its process group (a process that started its own session, e.g. with setsid, may still run)";
    body += `\n\nThe command did not finish within ${timeoutSeconds} ${unit} and ${killed}.`;
  } else if (r.exitCode !== null) {
    body += `\n\nExit code: ${r.exitCode}`;
  } else {
    body += `\n\nThe command was killed by signal ${r.exitSignal ?? "unknown"}.`;
  }
  return body;
}

/** Caps text at maxChars by keeping its head and tail, with a notice of what was cut. */
export function capHeadTail(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  const headLen = Math.ceil(maxChars * 0.6);
  const tailLen = maxChars - headLen;
  const omitted = text.length - headLen - tailLen;
  return (
    `${text.slice(0, headLen)}\n\n[output truncated: ${omitted} of ${text.length} characters omitted ` +
    `from the middle]\n\n${tailLen > 0 ? text.slice(-tailLen) : ""}`
  );
}
