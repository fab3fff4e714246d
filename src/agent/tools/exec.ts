/**
 * The `exec` tool: one shell command, with a timeout, a bounded output and a
 * guard against the obviously destructive. The command runs in its own
 * process group so the timeout and /stop kill everything it started, not
 * just the shell.
 */
import { spawn } from "node:child_process";
import { stat } from "node:fs/promises";
import { homedir } from "node:os";
import { delimiter, posix } from "node:path";
import { z } from "zod";
import { logger } from "../../log.js";
import { ConfigError, ToolError } from "../../util/errors.js";
import { defineTool, type Tool } from "./types.js";
import { resolveToolPath, type PathPolicy } from "./workspace-paths.js";

const log = logger("tool.exec");

export interface ExecToolOptions {
  workspace: string;
  restrictToWorkspace: boolean;
  timeoutSeconds: number;
  maxOutputChars: number;
  /** Appended to PATH when non-empty. */
  pathAppend: string;
  /** Extra regular expressions (strings, case-insensitive) of commands to refuse. */
  denyPatterns: string[];
  /** Milliseconds between SIGTERM and SIGKILL of the process group. */
  killGraceMs?: number;
}

const DEFAULT_KILL_GRACE_MS = 2000;
/** After SIGKILL, how long to wait for the pipes to close before giving up on them. */
const CLOSE_AFTER_KILL_MS = 1000;

export function createExecTool(opts: ExecToolOptions): Tool {
  const policy: PathPolicy = { workspace: opts.workspace, restrict: opts.restrictToWorkspace };
  const extraDeny = compileDenyPatterns(opts.denyPatterns);
  return defineTool({
    name: "exec",
    description:
      "Execute a shell command and return its output (stdout, stderr and exit code). Use with caution. " +
      `Commands time out after ${opts.timeoutSeconds} seconds. A command that starts something in the ` +
      "background must redirect its output (e.g. `cmd > log 2>&1 &`), or exec waits for it.",
    parameters: z.object({
      command: z.string().describe("The shell command to execute"),
      working_dir: z
        .string()
        .optional()
        .describe("Optional working directory for the command (defaults to the workspace)"),
    }),
    async execute({ command, working_dir }, ctx) {
      if (command.trim() === "") throw new ToolError("the command is empty");
      const refusal = findDestructive(command) ?? matchExtra(command, extraDeny);
      if (refusal) {
        throw new ToolError(
          `command refused by the safety guard (${refusal}). ` +
            "If it is really needed, ask the user to run it themselves.",
        );
      }
      const cwd = await resolveToolPath(working_dir ?? ".", policy);
      const st = await stat(cwd).catch(() => null);
      if (!st?.isDirectory())
        throw new ToolError(`working_dir ${working_dir ?? cwd} is not an existing directory`);
      const result = await runCommand(command, {
        cwd,
        env: commandEnv(process.env, opts.pathAppend),
        timeoutMs: opts.timeoutSeconds * 1000,
        killGraceMs: opts.killGraceMs ?? DEFAULT_KILL_GRACE_MS,
        signal: ctx.signal,
        keepChars: opts.maxOutputChars,
      });
      return formatResult(result, opts.timeoutSeconds, opts.maxOutputChars);
    },
  });
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

/**
 * The environment of a command: palaver's own settings (PALAVER_*, which
 * carry its API keys when set through the environment) are left out, and
 * pathAppend is added to PATH.
 */
export function commandEnv(base: NodeJS.ProcessEnv, pathAppend: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(base)) if (!k.startsWith("PALAVER_")) env[k] = v;
  if (pathAppend) env.PATH = env.PATH ? `${env.PATH}${delimiter}${pathAppend}` : pathAppend;
  return env;
}

// ---------------------------------------------------------------- the guard

/**
 * Patterns of commands that are refused outright. This is a seatbelt against
 * a model's slip, not a sandbox: a determined command can always be written
 * around it.
 */
const DESTRUCTIVE: { re: RegExp; why: string }[] = [
  { re: /--no-preserve-root/i, why: "rm --no-preserve-root" },
  { re: /\bmkfs(\.\w+)?\b/i, why: "formats a file system (mkfs)" },
  { re: /\b(wipefs|diskpart)\b/i, why: "wipes a disk" },
  {
    re: /\bdd\b[^;&|\n]*\bof=\/dev\/(?!null\b|zero\b|stdout\b|stderr\b|tty\b)/i,
    why: "dd writing to a device",
  },
  {
    re: />\s*\/dev\/(sd|hd|vd|xvd|nvme|mmcblk|disk|md|dm-|mapper\/|loop)/i,
    why: "writes straight to a disk device",
  },
  {
    re: /(^|[;&|\n({`]|\$\()\s*(sudo\s+(-\S+\s+)*)?(shutdown|reboot|poweroff|halt)\b/i,
    why: "shuts down or reboots the machine",
  },
  {
    re: /\bsystemctl\s+(\S+\s+)*(poweroff|reboot|halt|kexec|suspend|hibernate)\b/i,
    why: "shuts down or reboots the machine",
  },
  { re: /\binit\s+[06]\b/, why: "shuts down or reboots the machine" },
  { re: /\bkill\s+(-\S+\s+)*-1\b/, why: "kills every process" },
  // The classic `:(){ :|:& };:` and the same shape with any function name.
  { re: /([\w:.-]+)\s*\(\)\s*\{[^}]*\1\s*\|\s*\1\s*&/, why: "a fork bomb" },
];

/** Top-level system folders that a recursive rm/chmod/chown must never hit. */
const SYSTEM_DIRS = new Set(
  [
    "bin",
    "boot",
    "dev",
    "etc",
    "home",
    "lib",
    "lib32",
    "lib64",
    "opt",
    "proc",
    "root",
    "run",
    "sbin",
    "srv",
    "sys",
    "usr",
    "var",
  ].map((d) => `/${d}`),
);

/** Why `command` is refused, or null when it is not obviously destructive. */
export function findDestructive(command: string): string | null {
  for (const { re, why } of DESTRUCTIVE) if (re.test(command)) return why;
  for (const segment of command.split(/&&|\|\||[;&|\n()`]/)) {
    const why = destructiveSegment(segment);
    if (why) return why;
  }
  return null;
}

/** One simple command: is it a recursive rm/chmod/chown of /, ~ or a system folder? */
function destructiveSegment(segment: string): string | null {
  const words = segment
    .trim()
    .split(/\s+/)
    .map((w) => w.replace(/^["']|["']$/g, ""))
    .filter(Boolean);
  // Skip wrappers so `sudo rm -rf /` is seen as rm.
  let i = 0;
  while (i < words.length && /^(sudo|doas|env|nohup|nice|time|command|exec|builtin)$/.test(words[i]!)) i++;
  while (i < words.length && (words[i]!.startsWith("-") || /^\w+=/.test(words[i]!))) i++;
  const cmd = words[i] ? posix.basename(words[i]!) : "";
  if (cmd !== "rm" && cmd !== "chmod" && cmd !== "chown" && cmd !== "chgrp") return null;
  const args = words.slice(i + 1);
  const recursive = args.some((a) => a === "--recursive" || /^-[a-zA-Z]*[rR][a-zA-Z]*$/.test(a));
  if (!recursive) return null;
  const target = args.find((a) => !a.startsWith("-") && isCriticalPath(a));
  return target ? `recursive ${cmd} of ${target}` : null;
}

function isCriticalPath(arg: string): boolean {
  const home = homedir();
  let p = arg
    .replace(/^(\$HOME|\$\{HOME\}|~)(?=\/|$)/, home)
    .replace(/\/\*$/, "/")
    .replace(/\/+$/, "");
  if (p === "" || p === "/" || p === "/*") return true;
  if (!p.startsWith("/")) return false;
  p = posix.normalize(p).replace(/\/+$/, "") || "/";
  return p === "/" || p === home.replace(/\/+$/, "") || SYSTEM_DIRS.has(p);
}

// ---------------------------------------------------------------- running

export interface RunOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
  killGraceMs: number;
  signal: AbortSignal;
  /** Characters kept from the start and from the end of each stream. */
  keepChars?: number;
}

export interface RunResult {
  stdout: CappedText;
  stderr: CappedText;
  /** Null when killed by a signal. */
  exitCode: number | null;
  exitSignal: string | null;
  timedOut: boolean;
  aborted: boolean;
}

/**
 * Runs `/bin/sh -c command` in a new process group with stdin from /dev/null.
 * Resolves when the pipes close (or, after a kill, at most CLOSE_AFTER_KILL_MS
 * later, in case something escaped the group and holds them open).
 */
export function runCommand(command: string, opts: RunOptions): Promise<RunResult> {
  return new Promise((resolvePromise, reject) => {
    const keep = opts.keepChars ?? 64_000;
    const stdout = new CappedText(keep);
    const stderr = new CappedText(keep);
    let timedOut = false;
    let aborted = false;
    let killTimer: NodeJS.Timeout | undefined;
    let giveUpTimer: NodeJS.Timeout | undefined;
    let settled = false;

    const child = spawn("/bin/sh", ["-c", command], {
      cwd: opts.cwd,
      env: opts.env,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout.setEncoding("utf8").on("data", (d: string) => stdout.push(d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => stderr.push(d));

    const killGroup = (sig: NodeJS.Signals) => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, sig);
      } catch (err) {
        // ESRCH: the whole group is already gone.
        if ((err as NodeJS.ErrnoException).code !== "ESRCH")
          log.warn({ err, sig }, "could not signal process group");
      }
    };
    const stop = () => {
      if (killTimer) return;
      killGroup("SIGTERM");
      killTimer = setTimeout(() => {
        killGroup("SIGKILL");
        giveUpTimer = setTimeout(() => {
          child.stdout.destroy();
          child.stderr.destroy();
          finish(child.exitCode, child.signalCode);
        }, CLOSE_AFTER_KILL_MS);
      }, opts.killGraceMs);
    };
    const onAbort = () => {
      aborted = true;
      stop();
    };
    const timeout = setTimeout(() => {
      timedOut = true;
      stop();
    }, opts.timeoutMs);
    if (opts.signal.aborted) onAbort();
    else opts.signal.addEventListener("abort", onAbort, { once: true });

    function cleanup() {
      clearTimeout(timeout);
      clearTimeout(killTimer);
      clearTimeout(giveUpTimer);
      opts.signal.removeEventListener("abort", onAbort);
    }
    function finish(code: number | null, sig: NodeJS.Signals | null) {
      if (settled) return;
      settled = true;
      cleanup();
      resolvePromise({ stdout, stderr, exitCode: code, exitSignal: sig, timedOut, aborted });
    }
    child.on("error", (err) => {
      if (settled) return;
      settled = true;
      cleanup();
      reject(new ToolError(`could not start /bin/sh: ${err.message}`, { cause: err }));
    });
    child.on("close", (code, sig) => {
      // The shell may be gone while something it started in the background
      // still runs in the group; a killed turn must not leave it behind.
      if (timedOut || aborted) killGroup("SIGKILL");
      finish(code, sig);
    });
  });
}

/** Keeps the first and the last `keep` characters of a stream, counting the rest. */
export class CappedText {
  private head = "";
  private tail = "";
  private total = 0;
  constructor(private readonly keep: number) {}

  push(chunk: string): void {
    this.total += chunk.length;
    if (this.head.length < this.keep) {
      const room = this.keep - this.head.length;
      this.head += chunk.slice(0, room);
      chunk = chunk.slice(room);
    }
    if (chunk) this.tail = (this.tail + chunk).slice(-this.keep);
  }

  get length(): number {
    return this.total;
  }

  /** The text, with the middle replaced by a marker when some of it was dropped. */
  toString(): string {
    const dropped = this.total - this.head.length - this.tail.length;
    if (dropped <= 0) return this.head + this.tail;
    return `${this.head}\n[... ${dropped} characters omitted ...]\n${this.tail}`;
  }
}

// ---------------------------------------------------------------- formatting

function formatResult(r: RunResult, timeoutSeconds: number, maxChars: number): string {
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
    body += `\n\nThe command did not finish within ${timeoutSeconds} ${unit} and was killed (with everything it started).`;
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
