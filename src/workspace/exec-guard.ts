/**
 * The exec guard: a seatbelt against a model's slip, not a protection. It
 * refuses the obviously destructive (recursive deletes of /, the home folder,
 * the workspace root or palaver's state folder, formatting disks, rebooting),
 * also behind the usual wrappers (sudo -u X, nice, timeout, env, ...). A
 * determined command can always be written around it (a script file, eval,
 * variables); the sandbox (agent/tools/exec/sandbox.ts) is what actually confines.
 */
import { posix } from "node:path";

export interface GuardContext {
  /** The user's home folder. */
  home: string;
  /** The workspace root. */
  workspace: string;
  /** palaver's state folder (the folder of the config file). */
  stateDir: string;
  /** Where the command starts; relative targets are taken against it. */
  cwd: string;
}

/** Patterns over the whole command line (shapes that word splitting would miss). */
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
    re: /\bsystemctl\s+(\S+\s+)*(poweroff|reboot|halt|kexec|suspend|hibernate)\b/i,
    why: "shuts down or reboots the machine",
  },
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

const POWER = new Set(["shutdown", "reboot", "poweroff", "halt"]);

/**
 * Commands that run the rest of the line as another command, with the options
 * of theirs that take a separate value and how many plain arguments they take
 * before the command (timeout's DURATION).
 */
const WRAPPERS: Record<string, { valueOptions?: string[]; positional?: number }> = {
  sudo: { valueOptions: ["-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T"] },
  doas: { valueOptions: ["-u", "-C"] },
  nice: { valueOptions: ["-n"] },
  ionice: { valueOptions: ["-c", "-n", "-p", "-P", "-u"] },
  timeout: { valueOptions: ["-s", "-k"], positional: 1 },
  env: { valueOptions: ["-u", "-C"] },
  stdbuf: { valueOptions: ["-i", "-o", "-e"] },
  command: {},
  nohup: {},
  setsid: {},
  time: {},
  exec: { valueOptions: ["-a"] },
  builtin: {},
  busybox: {},
  // Shell keywords that may start a simple command.
  "{": {},
  "!": {},
  if: {},
  then: {},
  else: {},
  elif: {},
  do: {},
  while: {},
  until: {},
};

/** find's tests that narrow what it deletes; without one, `find DIR -delete` deletes all of DIR. */
const FIND_FILTERS =
  /^-(i?name|i?path|i?wholename|i?regex|type|x?type|newer\w*|[acm]time|[acm]min|size|empty|user|group|perm|links|uid|gid)$/;

/** Why `command` is refused, or null when it is not obviously destructive. */
export function findDestructive(command: string, ctx: GuardContext): string | null {
  for (const { re, why } of DESTRUCTIVE) if (re.test(command)) return why;
  let cwd = ctx.cwd;
  for (const segment of command.split(/&&|\|\||[;&|\n()`]/)) {
    const words = splitWords(segment);
    const at = unwrap(words);
    const cmd = words[at] ? posix.basename(words[at]) : "";
    const args = words.slice(at + 1);
    // Follow `cd` so `cd ~ && rm -rf *` is judged where it runs.
    if (cmd === "cd") {
      cwd = resolveTarget(args[0] ?? "~", { ...ctx, cwd });
      continue;
    }
    const why = destructiveCommand(cmd, args, { ...ctx, cwd });
    if (why) return why;
  }
  return null;
}

/** Whitespace-split words with surrounding quotes removed (a rough, best-effort shell split). */
function splitWords(segment: string): string[] {
  return segment
    .trim()
    .split(/\s+/)
    .map((w) => w.replace(/^["']+|["']+$/g, ""))
    .filter(Boolean);
}

/** Index of the real command in `words`, past variable assignments and wrappers like `sudo -u root`. */
function unwrap(words: string[]): number {
  let i = 0;
  for (let guard = 0; guard < words.length; guard++) {
    while (i < words.length && /^[A-Za-z_]\w*=/.test(words[i]!)) i++;
    const spec = words[i] === undefined ? undefined : WRAPPERS[posix.basename(words[i]!)];
    if (!spec) return i;
    i++;
    while (i < words.length && words[i]!.startsWith("-")) {
      const opt = words[i]!;
      i++;
      if (opt === "--") break;
      if (spec.valueOptions?.includes(opt)) i++;
    }
    while (i < words.length && /^[A-Za-z_]\w*=/.test(words[i]!)) i++;
    i += spec.positional ?? 0;
  }
  return i;
}

function destructiveCommand(cmd: string, args: string[], ctx: GuardContext): string | null {
  if (POWER.has(cmd)) return "shuts down or reboots the machine";
  if ((cmd === "init" || cmd === "telinit") && /^[06]$/.test(args[0] ?? ""))
    return "shuts down or reboots the machine";
  if (cmd === "rm") {
    const recursive = args.some((a) => a === "--recursive" || /^-[a-zA-Z]*[rR][a-zA-Z]*$/.test(a));
    if (!recursive) return null;
    const target = args.find((a) => !a.startsWith("-") && isCritical(a, ctx, { workspaceRoot: true }));
    return target ? `recursive rm of ${target}${explain(target, ctx)}` : null;
  }
  if (cmd === "chmod" || cmd === "chown" || cmd === "chgrp") {
    const recursive = args.some((a) => a === "--recursive" || /^-[a-zA-Z]*R[a-zA-Z]*$/.test(a));
    if (!recursive) return null;
    const target = args.find((a) => !a.startsWith("-") && isCritical(a, ctx, { workspaceRoot: false }));
    return target ? `recursive ${cmd} of ${target}${explain(target, ctx)}` : null;
  }
  if (cmd === "find") return destructiveFind(args, ctx);
  return null;
}

/** `find DIR... -delete` (or `-exec rm`): DIR must not be a critical folder. */
function destructiveFind(args: string[], ctx: GuardContext): string | null {
  const deletes = args.some(
    (a, i) =>
      a === "-delete" || (/^-(exec|execdir|ok|okdir)$/.test(a) && posix.basename(args[i + 1] ?? "") === "rm"),
  );
  if (!deletes) return null;
  const firstExpr = args.findIndex((a) => a.startsWith("-") || a === "(" || a === "!");
  const starts = (firstExpr === -1 ? args : args.slice(0, firstExpr)).filter((a) => !/^-[HLP]$/.test(a));
  // Cleaning the workspace of `*.pyc` is fine; deleting everything in it is not.
  const filtered = args.some((a) => FIND_FILTERS.test(a));
  const target = (starts.length ? starts : ["."]).find((a) =>
    isCritical(a, ctx, { workspaceRoot: !filtered }),
  );
  return target ? `find deleting ${target}${explain(target, ctx)}` : null;
}

/** Where a command argument points: `~`/$HOME expanded, a trailing `/*` dropped, relative taken against cwd. */
function resolveTarget(arg: string, ctx: GuardContext): string {
  let p = arg.replace(/^(\$HOME|\$\{HOME\}|~)(?=\/|$)/, ctx.home);
  if (p === "*" || p === ".*") p = ".";
  p = p.replace(/\/\.?\*$/, "/");
  return posix.resolve(ctx.cwd, p || "/");
}

/**
 * `/`, a system folder, or the home folder, the state folder, the workspace
 * (or a folder holding one of them: deleting `..` of the workspace deletes it too).
 */
function isCritical(arg: string, ctx: GuardContext, opts: { workspaceRoot: boolean }): boolean {
  const p = resolveTarget(arg, ctx);
  if (p === "/" || SYSTEM_DIRS.has(p)) return true;
  const protectedDirs = [ctx.home, ctx.stateDir, ctx.workspace].map((d) => posix.resolve(d));
  if (protectedDirs.some((d) => d !== p && isAncestor(p, d))) return true;
  if (p === protectedDirs[0] || p === protectedDirs[1]) return true;
  return opts.workspaceRoot && p === protectedDirs[2];
}

function isAncestor(parent: string, child: string): boolean {
  return parent === "/" || child.startsWith(`${parent}/`);
}

function explain(arg: string, ctx: GuardContext): string {
  const p = resolveTarget(arg, ctx);
  if (p === arg) return "";
  return ` (${p})`;
}
