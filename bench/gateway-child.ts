/**
 * The real `palaver gateway` as a child process for the benchmarks: the
 * compiled dist/main.js (what systemd runs), rebuilt first when src/ is newer,
 * or src/main.ts through tsx. Logs are JSON on stderr; the health endpoint's
 * address is read from them.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT, TSX } from "../tests/helpers/cli.js";
import { DIST_MAIN } from "../tests/helpers/dist.js";
import { healthUrlFromLog } from "../tests/helpers/gateway-process.js";

export type Entry = "dist" | "tsx";

export interface GatewayChild {
  child: ChildProcess;
  readonly stderr: string;
  /** Resolves with the health endpoint's base URL once logged. */
  healthUrl(timeoutMs: number): Promise<string>;
  /** SIGTERM, then the exit code (SIGKILL after timeoutMs). */
  stop(timeoutMs?: number): Promise<number | null>;
}

export function spawnGateway(
  entry: Entry,
  configPath: string,
  cwd: string,
  opts: { nodeArgs?: string[]; env?: NodeJS.ProcessEnv; ipc?: boolean } = {},
): GatewayChild {
  // BENCH_NODE_ARGS: extra flags for a look inside, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
  const fromEnv = process.env.BENCH_NODE_ARGS?.split(" ").filter(Boolean) ?? [];
  const args = [
    ...fromEnv,
    ...(opts.nodeArgs ?? []),
    ...(entry === "dist" ? [DIST_MAIN] : ["--import", TSX, join(ROOT, "src", "main.ts")]),
  ];
  const child = spawn(process.execPath, [...args, "gateway", "--config", configPath], {
    cwd,
    // As the systemd unit runs it (NODE_ENV=production), with a clean environment otherwise.
    env: { PATH: process.env.PATH, HOME: cwd, NO_COLOR: "1", NODE_ENV: "production", ...opts.env },
    // An IPC channel only for a preload of the bench's own (bench/heap-probe.mjs).
    stdio: opts.ipc ? ["ignore", "ignore", "pipe", "ipc"] : ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  const exited = once(child, "exit").then(([code]) => code as number | null);
  return {
    child,
    get stderr() {
      return stderr;
    },
    async healthUrl(timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const url = healthUrlFromLog(stderr);
        if (url) return url;
        if (child.exitCode !== null) throw new Error(`the gateway exited (${child.exitCode}):\n${stderr}`);
        if (Date.now() > deadline) throw new Error(`no health endpoint within ${timeoutMs} ms:\n${stderr}`);
        await new Promise((r) => setTimeout(r, 2));
      }
    },
    async stop(timeoutMs = 10_000) {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill("SIGTERM");
      const killer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
      try {
        return await exited;
      } finally {
        clearTimeout(killer);
      }
    },
  };
}

/** Resident memory of a process, from /proc (Linux), in bytes; undefined elsewhere. */
export function residentBytes(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = /^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1];
    return kb ? Number(kb) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** USER_HZ: the unit of utime/stime in /proc/<pid>/stat (100 on Linux everywhere that matters). */
const CLOCK_TICKS_PER_S = 100;

/**
 * CPU time (user + system) a process has used so far, in ms (10 ms resolution), from /proc
 * (Linux); undefined elsewhere. Unlike wall time it hardly depends on what else the machine runs.
 */
export function cpuMs(pid: number): number | undefined {
  try {
    // Fields after the command name (which may hold spaces) start at state: utime is the 12th, stime the 13th.
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_S;
  } catch {
    return undefined;
  }
}
