/**
 * One gateway per state folder, and one per workspace. Two gateways on the
 * same state folder corrupt each other's journal (the second one's startup
 * compaction renames the file the first is appending to, and the first then
 * writes into an unlinked file); two on one workspace (different config
 * folders) append to the same session files and show each other's web chat
 * conversations. So the gateway takes `<state folder>/gateway.lock` and
 * `<workspace>/sessions/gateway.lock` at start, and a second one exits 78
 * naming the pid that holds them.
 *
 * Node has no flock, so the lock is a pid file created with O_EXCL. A lock
 * left by a killed gateway is stale and taken over: its pid is gone, or (pid
 * reuse) the process with that pid started at another time than the one that
 * wrote the lock (/proc/<pid>/stat field 22; where /proc is missing, only the
 * pid is checked). Only the gateway takes the lock: CLI commands that edit
 * state (`palaver cron add`, ...) write their own files safely and keep
 * working under a running gateway.
 */
import { openSync, readFileSync, unlinkSync, writeSync, closeSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { logger, type Logger } from "../log.js";
import { ConfigError, errorMessage } from "../util/errors.js";

/** What a lock guards, and how a second gateway gets one of its own. */
export type LockedFolder = "state" | "workspace";

const OWN_ONE: Record<LockedFolder, string> = {
  state: "give this one its own config folder (--config)",
  workspace: "give this one its own workspace (agents.defaults.workspace)",
};

/** Another live gateway holds the folder. A ConfigError, so the CLI exits 78 and systemd does not loop. */
export class StateFolderInUseError extends ConfigError {
  constructor(
    readonly pid: number,
    readonly folder: string,
    what: LockedFolder = "state",
  ) {
    super(`another palaver gateway (pid ${pid}) uses ${folder}; stop it first, or ${OWN_ONE[what]}`);
  }
}

interface LockContent {
  pid: number;
  /** The process's start time in clock ticks since boot (/proc/<pid>/stat), when known. */
  startTime?: string;
}

export class StateLock {
  private released = false;
  private readonly onExit = () => this.release();

  private constructor(
    readonly path: string,
    private readonly content: string,
  ) {
    // Also on a crash that still runs exit handlers (uncaught exception, process.exit).
    process.once("exit", this.onExit);
  }

  /**
   * Takes the lock of `dir` (the state folder, or the workspace's sessions
   * folder), throwing StateFolderInUseError when a live gateway holds it. When
   * the lock file cannot be written at all (read-only or full disk) the gateway
   * runs without it, with a warning: it could not write its journal or
   * sessions there either, and /readyz says so.
   */
  static acquire(dir: string, log: Logger = logger("lock"), what: LockedFolder = "state"): StateLock | null {
    const path = join(dir, "gateway.lock");
    const mine: LockContent = { pid: process.pid, ...optional("startTime", startTimeOf(process.pid)) };
    const content = `${JSON.stringify(mine)}\n`;
    // Bounded: a second round only after removing a stale lock; a third means someone races us.
    for (let round = 0; round < 3; round++) {
      try {
        mkdirSync(dir, { recursive: true, mode: 0o700 });
        const fd = openSync(path, "wx", 0o600);
        try {
          writeSync(fd, content);
        } finally {
          closeSync(fd);
        }
        return new StateLock(path, content);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") {
          log.warn(
            { file: path, err: errorMessage(err) },
            `could not create the ${what} lock; running without protection against a second gateway`,
          );
          return null;
        }
      }
      const held = readLock(path);
      if (held && isAlive(held)) throw new StateFolderInUseError(held.pid, dir, what);
      removeIfUnchanged(path, held, log);
    }
    throw new Error(`could not take ${path}: another process keeps creating it`);
  }

  /** Removes the lock if it is still ours. Idempotent. */
  release(): void {
    if (this.released) return;
    this.released = true;
    process.off("exit", this.onExit);
    try {
      if (readFileSync(this.path, "utf8") === this.content) unlinkSync(this.path);
    } catch {
      // Already gone (or the folder is unreadable): nothing to release.
    }
  }
}

function readLock(path: string): LockContent | null {
  try {
    const parsed = JSON.parse(readFileSync(path, "utf8")) as Partial<LockContent>;
    if (typeof parsed.pid !== "number" || !Number.isSafeInteger(parsed.pid) || parsed.pid <= 0) return null;
    return { pid: parsed.pid, ...optional("startTime", parsed.startTime) };
  } catch {
    return null; // empty (its writer died between create and write) or garbage: stale
  }
}

/** Whether the process that wrote the lock is still running (and is the same process, not a reused pid). */
function isAlive(lock: LockContent): boolean {
  try {
    process.kill(lock.pid, 0);
  } catch (err) {
    // EPERM: it exists but belongs to another user; still alive.
    if ((err as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  const now = startTimeOf(lock.pid);
  if (lock.startTime === undefined || now === undefined) return true;
  return now === lock.startTime;
}

/** Removes a stale lock, unless another starter has replaced it meanwhile (then the next round reads theirs). */
function removeIfUnchanged(path: string, stale: LockContent | null, log: Logger): void {
  try {
    const again = readLock(path);
    if (JSON.stringify(again) !== JSON.stringify(stale)) return;
    unlinkSync(path);
    log.warn({ file: path, stalePid: stale?.pid }, "removed a stale gateway lock (its gateway is gone)");
  } catch {
    // Gone already: the next round creates ours.
  }
}

/** Field 22 of /proc/<pid>/stat (after the parenthesised command name, which may hold spaces). */
function startTimeOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}

/** The pid of the live gateway holding `stateDir`'s lock, or null (doctor, backup restore). */
export function runningGatewayPid(stateDir: string): number | null {
  const held = readLock(join(stateDir, "gateway.lock"));
  return held && isAlive(held) ? held.pid : null;
}
