/**
 * Running palaver as a child process: the build in dist/ (what `npm start` and
 * the systemd unit run; tests/global-setup.ts builds it first), or a test's own
 * .ts entry through tsx, with a clean environment and a hard time limit.
 *
 * Six children started at once on a loaded 2-core machine took over 20 s and
 * were killed mid-test. So short-lived children (runCli) run at most
 * CLI_CONCURRENCY at a time per test file, and the time limit is generous:
 * it only exists so a hung child never outlives the test run.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { Semaphore } from "../../src/util/semaphore.js";
import { DIST_MAIN } from "./dist.js";

export const ROOT = join(import.meta.dirname, "..", "..");
/** The CLI the children run: dist/main.js, the build. */
export const MAIN = DIST_MAIN;
/** An absolute loader URL: children run in temp folders where "tsx" would not resolve. */
export const TSX = pathToFileURL(join(ROOT, "node_modules", "tsx", "dist", "loader.mjs")).href;

/** Default hard limit for one child: far above a loaded machine's start time; a hang still ends. */
export const CHILD_TIMEOUT_MS = 60_000;
/** Short-lived children running at once per test file (vitest gives each file its own module copy). */
export const CLI_CONCURRENCY = 2;
const slots = new Semaphore(CLI_CONCURRENCY);

export interface CliOptions {
  cwd: string;
  /** Added to a clean environment (PATH only, no PALAVER_* of the developer's shell). */
  env?: NodeJS.ProcessEnv;
  /** The entry to run; default MAIN (the build). A .ts entry (a test's own) runs through tsx. */
  entry?: string;
  /** Hard limit: the child is SIGKILLed after it (default CHILD_TIMEOUT_MS). */
  timeoutMs?: number;
  /** Written to the child's stdin (runCli then closes it); default nothing. */
  stdin?: string;
  /** Run the child as this user (only root may): a test of what an ordinary account sees. */
  as?: { uid: number; gid: number };
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface CliFolder {
  /** The temp folder (the caller removes it): a HOME, `conf/config.json`, the workspace `ws`. */
  dir: string;
  configPath: string;
  /** `palaver <args>` in it, with its HOME and config, quiet logs, and the folder's `env`. */
  run(args: string[]): Promise<CliResult>;
}

/** A temp folder to run `palaver` in as a user would, its config naming a workspace inside it. */
export async function cliFolder(prefix: string, env: NodeJS.ProcessEnv = {}): Promise<CliFolder> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  const home = join(dir, "home");
  await mkdir(home);
  const configPath = join(dir, "conf", "config.json");
  await mkdir(join(dir, "conf"));
  await writeFile(configPath, JSON.stringify({ agents: { defaults: { workspace: join(dir, "ws") } } }));
  return {
    dir,
    configPath,
    run: (args) =>
      runCli(args, {
        cwd: dir,
        env: { HOME: home, PALAVER_CONFIG: configPath, PALAVER_LOG_LEVEL: "silent", ...env },
      }),
  };
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
  const entry = opts.entry ?? MAIN;
  const loader = entry.endsWith(".ts") ? ["--import", TSX] : [];
  const child = spawn(process.execPath, [...loader, entry, ...args], {
    cwd: opts.cwd,
    env: { PATH: process.env.PATH, NO_COLOR: "1", ...opts.env },
    stdio: ["pipe", "pipe", "pipe"],
    ...opts.as,
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const killer = setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs ?? CHILD_TIMEOUT_MS);
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

/**
 * Runs a command to its end. Waits for a free slot first (the time limit
 * starts with the child), so `Promise.all` over many calls is safe.
 */
export async function runCli(args: string[], opts: CliOptions): Promise<CliResult> {
  const release = await slots.acquire();
  try {
    const running = startCli(args, opts);
    running.child.stdin.end(opts.stdin);
    const code = await running.exited;
    return { code, stdout: running.stdout, stderr: running.stderr };
  } finally {
    release();
  }
}
