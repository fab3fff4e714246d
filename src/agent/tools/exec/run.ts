/**
 * Running one command as a child process: its own process group (so the
 * timeout and /stop reach everything it started that stayed in the group;
 * inside the sandbox, bwrap's PID namespace reaches the rest), stdin from
 * /dev/null, stdout and stderr kept bounded.
 */
import { spawn } from "node:child_process";
import { logger } from "../../../log.js";
import { ToolError } from "../../../util/errors.js";

const log = logger("tool.exec");

/** After SIGKILL, how long to wait for the pipes to close before giving up on them. */
const CLOSE_AFTER_KILL_MS = 1000;

export interface RunOptions {
  /** The program and its arguments: `/bin/sh -c COMMAND`, or bwrap wrapped around it. */
  argv: readonly [string, ...string[]];
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
 * Runs `argv` in a new process group with stdin from /dev/null.
 * Resolves when the pipes close (or, after a kill, at most CLOSE_AFTER_KILL_MS
 * later, in case something escaped the group and holds them open).
 */
export function runCommand(opts: RunOptions): Promise<RunResult> {
  return new Promise((resolvePromise, reject) => {
    const keep = opts.keepChars ?? 64_000;
    const stdout = new CappedText(keep);
    const stderr = new CappedText(keep);
    let timedOut = false;
    let aborted = false;
    let killTimer: NodeJS.Timeout | undefined;
    let giveUpTimer: NodeJS.Timeout | undefined;
    let settled = false;

    const [file, ...args] = opts.argv;
    const child = spawn(file, args, {
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
      reject(new ToolError(`could not start ${file}: ${err.message}`, { cause: err }));
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
