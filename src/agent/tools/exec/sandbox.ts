/**
 * The exec sandbox: bubblewrap (`bwrap`) runs each command in its own user,
 * mount, PID, IPC and UTS namespaces (and network namespace when
 * tools.exec.network is false), as an unprivileged user with every capability
 * dropped, also when palaver runs as root. Inside, the workspace is the only
 * writable folder besides a private /tmp; the system folders needed to run
 * programs are read-only; the home folder, palaver's state folder (config,
 * journal, .env) and the daemon's /proc are not there at all. The PID
 * namespace is what makes the timeout truthful: when bwrap goes, the kernel
 * kills every process inside it, also ones that called setsid.
 *
 * Whether the sandbox works is probed once per process (some distributions
 * forbid unprivileged user namespaces), off the hot path: the gateway awaits
 * it at start, everything else on the first command. The probe runs in the
 * same sandbox and reads its own /proc/self/status: a bwrap that started but
 * left the command root or with capabilities does not count as a sandbox.
 */
import { spawn } from "node:child_process";
import { constants, existsSync, lstatSync, readdirSync, readlinkSync, realpathSync } from "node:fs";
import { access } from "node:fs/promises";
import { delimiter, join } from "node:path";
import { ConfigError, errorMessage } from "../../../util/errors.js";
import { isInside } from "../../../workspace/paths.js";

export type SandboxMode = "auto" | "require" | "off";

export type SandboxState =
  | { sandboxed: true; bwrap: string; network: boolean }
  | { sandboxed: false; mode: SandboxMode; reason: string };

export const INSTALL_HINT = "install it with `sudo apt-get install bubblewrap` (Debian/Ubuntu)";
const NOT_INSTALLED = "bwrap (bubblewrap) is not installed";

/** Read-only inside the sandbox when present: what programs need to run, nothing of any user. */
const SYSTEM_PATHS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"];
/**
 * Files of the host that only root may read. A command runs as a user that is root outside the
 * sandbox when palaver is root (the user namespace maps it so the workspace stays writable), so
 * the owner's read permission would still let it read these: they are covered instead.
 */
const HOST_SECRETS = [
  "/etc/shadow",
  "/etc/shadow-",
  "/etc/gshadow",
  "/etc/gshadow-",
  "/etc/sudoers",
  "/etc/sudoers.d",
  "/etc/ssl/private",
  "/etc/security/opasswd",
];
/** sshd's host keys (ssh_host_*_key), found when the arguments are built. */
const SSH_DIR = "/etc/ssh";

/** Where /etc/resolv.conf points on systemd-resolved machines, so DNS works inside. */
const RESOLVER_PATHS = ["/run/systemd/resolve"];
/** A probe that has not answered by then has failed (generous: the machine may be busy). */
const PROBE_TIMEOUT_MS = 20_000;
/** The overflow user and group ("nobody"/"nogroup"): who commands run as when palaver is root. */
const NOBODY = 65534;
/** Characters of the probe's output kept: /proc/self/status is about 1,500. */
const PROBE_OUTPUT_MAX = 16_384;

export interface ExecSandboxOptions {
  mode: SandboxMode;
  /** tools.exec.network: false gives commands a network namespace with only loopback. */
  network: boolean;
  /** Which bwrap to use (tests); default: the first `bwrap` on PATH. */
  bwrapPath?: string;
}

/** The result of one probe per bwrap and network setting, for the whole process. */
const probes = new Map<string, Promise<string | null>>();

/**
 * Decides once whether exec commands are sandboxed. `state()` is cached; with
 * mode "require" and no working bwrap it rejects with a ConfigError naming
 * the reason and the install line (the gateway exits 78 on it).
 */
export class ExecSandbox {
  private cached: Promise<SandboxState> | undefined;
  private settled: SandboxState | undefined;

  constructor(private readonly opts: ExecSandboxOptions) {}

  state(): Promise<SandboxState> {
    this.cached ??= this.decide().then((state) => {
      this.settled = state;
      if (state.sandboxed || state.mode !== "require") return state;
      throw new ConfigError('tools.exec.sandbox is "require" but the exec sandbox cannot be used', [
        `tools.exec.sandbox: ${state.reason}; ${remedy(state.reason)}, or set it to "auto" or "off"`,
      ]);
    });
    return this.cached;
  }

  /** The decision once made (also a failed "require"), for /status, which must not wait; else undefined. */
  get current(): SandboxState | undefined {
    return this.settled;
  }

  private async decide(): Promise<SandboxState> {
    const { mode, network } = this.opts;
    if (mode === "off") return { sandboxed: false, mode, reason: 'tools.exec.sandbox is "off"' };
    const bwrap = await locateBwrap(this.opts.bwrapPath);
    const failure = bwrap ? await probeOnce(bwrap, network) : NOT_INSTALLED;
    if (bwrap && failure === null) return { sandboxed: true, bwrap, network };
    return { sandboxed: false, mode, reason: failure ?? "bwrap did not work" };
  }
}

/** One line for the startup log, `palaver status` and `/status`. */
export function describeSandbox(state: SandboxState): string {
  if (state.sandboxed) return `sandboxed with bubblewrap (network ${state.network ? "on" : "off"})`;
  if (state.mode === "off") return `NOT sandboxed (${state.reason})`;
  const who = process.getuid?.() === 0 ? "as root" : "with palaver's own permissions";
  return `NOT sandboxed (${state.reason}): commands run ${who}; to confine them, ${remedy(state.reason)}`;
}

/** What to do about a sandbox that cannot be used. */
function remedy(reason: string): string {
  return reason === NOT_INSTALLED ? INSTALL_HINT : 'see "Shell commands" in the README';
}

/**
 * Who commands run as inside: palaver's own user and group when they are not
 * root (so the workspace's files show as the command's own), else nobody.
 * Files a command creates belong to palaver's user outside either way.
 */
function sandboxIds(ids: { uid: number; gid: number }): { uid: number; gid: number } {
  return { uid: ids.uid === 0 ? NOBODY : ids.uid, gid: ids.gid === 0 ? NOBODY : ids.gid };
}

export interface SandboxLayout {
  /** The workspace (absolute): bound read-write at the same path. */
  workspace: string;
  /** Where the command starts (inside the workspace). */
  cwd: string;
  network: boolean;
  /**
   * Files and folders that must not be visible (the config, the state
   * folder, .env files). Only those inside a bound folder need hiding;
   * everything else is absent from the sandbox anyway.
   */
  hidden: readonly string[];
}

/** The bwrap arguments (before the command) for one command. Order matters: later mounts cover earlier ones. */
export function bwrapArgs(layout: SandboxLayout): string[] {
  const args = baseArgs(layout.network);
  args.push("--bind", layout.workspace, layout.workspace);
  const bound = [...SYSTEM_PATHS, layout.workspace];
  const masked: string[] = [];
  // Folders first, so a file inside a hidden folder needs no mask of its own (it would show up as an entry).
  const hidden = [...layout.hidden, ...hostSecrets()].sort(
    (a, b) => Number(isDirectory(b)) - Number(isDirectory(a)),
  );
  for (const path of hidden) {
    if (masked.some((m) => isInside(path, m))) continue;
    const mask = maskArgs(path, bound, layout.workspace);
    if (mask.length) masked.push(mask.at(-1)!);
    args.push(...mask);
  }
  // bwrap's own root (where the mount points were made) becomes read-only too.
  args.push("--remount-ro", "/", "--chdir", layout.cwd);
  return args;
}

/** The host's root-only secrets that exist on this machine. */
function hostSecrets(): string[] {
  let sshKeys: string[] = [];
  try {
    sshKeys = readdirSync(SSH_DIR)
      .filter((name) => /^ssh_host_.*_key$/.test(name))
      .map((name) => join(SSH_DIR, name));
  } catch {
    // No sshd here.
  }
  return [...HOST_SECRETS, ...sshKeys].filter((path) => existsSync(path));
}

/** Namespaces, an unprivileged user, the read-only system, its own /proc and /dev, a private /tmp. */
function baseArgs(network: boolean): string[] {
  const ids = sandboxIds({ uid: process.getuid?.() ?? NOBODY, gid: process.getgid?.() ?? NOBODY });
  const args = ["--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts"];
  // Started as root, bwrap keeps root and nearly every capability unless told: its own user
  // namespace, a user that is not 0 and no capabilities make root's powers (clock, mounts,
  // modules) unreachable. Unprivileged, bwrap does the same on its own; saying it costs nothing.
  args.push("--unshare-user", "--uid", String(ids.uid), "--gid", String(ids.gid), "--cap-drop", "ALL");
  if (!network) args.push("--unshare-net");
  for (const path of [...SYSTEM_PATHS, ...RESOLVER_PATHS]) {
    const link = symlinkTarget(path);
    // Merged-/usr systems have /bin -> usr/bin: recreate the link rather than binding its target twice.
    if (link !== null) args.push("--symlink", link, path);
    else if (existsSync(path)) args.push("--ro-bind", path, path);
  }
  args.push("--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp");
  return args;
}

/** Covers `path` (a folder with an empty tmpfs, a file with /dev/null) when a bound folder would show it. */
function maskArgs(path: string, bound: readonly string[], workspace: string): string[] {
  const real = realPathOrNull(path);
  if (real === null) return [];
  const visible = bound.some((b) => isInside(path, b) || isInside(real, realPathOrNull(b) ?? b));
  if (!visible) return [];
  if (!lstatSync(real).isDirectory()) return ["--ro-bind", "/dev/null", real];
  // A state folder that is the workspace itself (config.json in the workspace root) cannot be
  // hidden without hiding the workspace: then only its files (config, .env) are masked.
  return isInside(realPathOrNull(workspace) ?? workspace, real) ? [] : ["--tmpfs", real];
}

function isDirectory(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch {
    return false;
  }
}

function symlinkTarget(path: string): string | null {
  try {
    return lstatSync(path).isSymbolicLink() ? readlinkSync(path) : null;
  } catch {
    return null;
  }
}

function realPathOrNull(path: string): string | null {
  try {
    return realpathSync(path);
  } catch {
    return null;
  }
}

/** The given bwrap when it is executable, else the first one on PATH; null when there is none. */
async function locateBwrap(given: string | undefined): Promise<string | null> {
  if (given !== undefined) return (await isExecutable(given)) ? given : null;
  return findOnPath("bwrap");
}

/** The first executable `name` on PATH, or null. */
async function findOnPath(name: string): Promise<string | null> {
  const dirs = (process.env.PATH ?? "").split(delimiter).filter(Boolean);
  for (const dir of dirs) {
    const candidate = join(dir, name);
    if (await isExecutable(candidate)) return candidate;
  }
  return null;
}

function isExecutable(path: string): Promise<boolean> {
  return access(path, constants.X_OK).then(
    () => true,
    () => false,
  );
}

function probeOnce(bwrap: string, network: boolean): Promise<string | null> {
  const key = `${bwrap}\0${network}`;
  let probe = probes.get(key);
  if (!probe) {
    probe = probe_(bwrap, network);
    probes.set(key, probe);
  }
  return probe;
}

/**
 * Runs `cat /proc/self/status` in the sandbox commands get: null when it ran
 * as a user other than root with no capability at all, else why not.
 */
function probe_(bwrap: string, network: boolean): Promise<string | null> {
  return new Promise((resolve) => {
    let stdout = "";
    let stderr = "";
    const child = spawn(
      bwrap,
      [...baseArgs(network), "--remount-ro", "/", "--", "cat", "/proc/self/status"],
      {
        env: { PATH: "/usr/bin:/bin" },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    const timer = setTimeout(() => child.kill("SIGKILL"), PROBE_TIMEOUT_MS);
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      if (stdout.length < PROBE_OUTPUT_MAX) stdout += d;
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d.slice(0, 2000)));
    child.on("error", (err) => {
      clearTimeout(timer);
      resolve(`bwrap could not be started (${errorMessage(err)})`);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) return resolve(privilegeProblem(stdout));
      const said = stderr.trim().split("\n")[0] ?? "";
      const why = signal ? `was killed (${signal})` : `exited with ${code}${said ? `: ${said}` : ""}`;
      resolve(
        `the bwrap test run ${why}` +
          (/namespace|uid map|permission|not permitted/i.test(said)
            ? " (unprivileged user namespaces may be disabled on this machine)"
            : ""),
      );
    });
  });
}

/**
 * What is wrong with the privileges a sandboxed process reported in its
 * /proc/self/status (null when it is uid non-zero with every capability set
 * empty); missing lines count as wrong, since then nothing was shown.
 */
function privilegeProblem(status: string): string | null {
  const uids = /^Uid:\s*(.+)$/m.exec(status)?.[1]?.trim().split(/\s+/);
  if (!uids) return "the bwrap test run did not show which user it ran as";
  if (uids.includes("0")) return "commands in the bwrap test run still ran as root (uid 0)";
  const capLines = [...status.matchAll(/^(Cap\w+):\s*([0-9a-f]+)$/gm)];
  if (!capLines.some(([, name]) => name === "CapEff"))
    return "the bwrap test run did not show its capabilities";
  const kept = capLines
    .filter(([, , mask]) => !/^0+$/.test(mask!))
    .map(([, name, mask]) => `${name} ${mask}`);
  if (kept.length) return `commands in the bwrap test run kept capabilities (${kept.join(", ")})`;
  return null;
}
