/**
 * Running palaver (or a test's own CLI entry) as a child process, through tsx
 * so the sources are tested, with a clean environment and a hard time limit.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

export const ROOT = join(import.meta.dirname, "..", "..");
export const MAIN = join(ROOT, "src", "main.ts");
/** An absolute loader URL: children run in temp folders where "tsx" would not resolve. */
export const TSX = pathToFileURL(join(ROOT, "node_modules", "tsx", "dist", "loader.mjs")).href;

export interface CliOptions {
  cwd: string;
  /** Added to a clean environment (PATH only, no PALAVER_* of the developer's shell). */
  env?: NodeJS.ProcessEnv;
  /** The entry to run; default src/main.ts. */
  entry?: string;
  timeoutMs?: number;
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface RunningCli {
  child: ChildProcessWithoutNullStreams;
  readonly stdout: string;
  readonly stderr: string;
  /** Resolves once stderr contains `text`. */
  stderrIncludes(text: string): Promise<void>;
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
}

export function startCli(args: string[], opts: CliOptions): RunningCli {
  const child = spawn(process.execPath, ["--import", TSX, opts.entry ?? MAIN, ...args], {
    cwd: opts.cwd,
    env: { PATH: process.env.PATH, NO_COLOR: "1", ...opts.env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const killer = setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs ?? 20_000);
  const exited = new Promise<number | null>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(killer);
      resolve(code);
    });
  });
  return {
    child,
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    stderrIncludes(text) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!stderr.includes(text)) return;
          child.stderr.off("data", check);
          resolve();
        };
        child.stderr.on("data", check);
        void exited.then(() =>
          stderr.includes(text)
            ? resolve()
            : reject(new Error(`exited before printing "${text}":\n${stderr}`)),
        );
        check();
      });
    },
    exited,
  };
}

export async function runCli(args: string[], opts: CliOptions): Promise<CliResult> {
  const running = startCli(args, opts);
  running.child.stdin.end();
  const code = await running.exited;
  return { code, stdout: running.stdout, stderr: running.stderr };
}
