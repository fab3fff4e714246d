/**
 * sd_notify(3) for the gateway: READY=1, STATUS=…, STOPPING=1 and WATCHDOG=1 sent to the
 * service manager at $NOTIFY_SOCKET. Everything is a no-op when NOTIFY_SOCKET is unset (not
 * started by systemd, or a unit with Type=simple), and a failed notification is logged, never
 * thrown: the daemon must not stop because systemd could not be told something.
 *
 * Transport. The protocol is one datagram on an AF_UNIX SOCK_DGRAM socket, which Node cannot
 * open (node:net is stream-only, node:dgram is UDP-only). The choices were:
 *   - npm `sd-notify` or `unix-dgram`: native addons compiled by node-gyp at install time
 *     (sd-notify also needs the libsystemd headers). A failed build would break
 *     `npm install palaver` on every machine that lacks a compiler, systemd or not.
 *   - the `systemd-notify` tool, installed wherever systemd is. Its datagrams come from a
 *     child process, so the unit needs NotifyAccess=all (not main). The classic race of that
 *     setup (the child exits before systemd reads its datagram, systemd can no longer tell
 *     which unit it came from and drops it) is closed by systemd-notify itself: since systemd
 *     246 it waits for a BARRIER=1 round trip before exiting.
 * We spawn the tool: no build step, nothing to vendor, and the cost (one short process per
 * message, a watchdog ping every WatchdogSec/2) is negligible for a daemon.
 */
import { spawn } from "node:child_process";
import { logger, type Logger } from "../log.js";
import { PalaverError } from "../util/errors.js";

/** Sends one sd_notify message (its `KEY=VALUE` fields) to the socket; rejects on failure. */
export type NotifyTransport = (socket: string, fields: readonly string[]) => Promise<void>;

export interface NotifierOptions {
  /** Where NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID are read (once, at creation). */
  env?: NodeJS.ProcessEnv;
  /** Removes those variables from `env` after reading them, like sd_notify's unset_environment,
   *  so tool commands and MCP servers started later do not inherit the service's socket. */
  unsetEnvironment?: boolean;
  transport?: NotifyTransport;
  /** Our pid, compared with WATCHDOG_PID (default process.pid). */
  pid?: number;
  log?: Logger;
}

export interface Notifier {
  /** Whether there is a service manager to notify (NOTIFY_SOCKET was set). */
  readonly enabled: boolean;
  /** How often startWatchdog pings (half of WatchdogSec), or undefined when no watchdog is asked for. */
  readonly watchdogIntervalMs: number | undefined;
  /** Sends `KEY=VALUE` fields as one message; resolves when sent, failed (logged) or dropped. */
  notify(fields: readonly string[]): Promise<void>;
  ready(status?: string): Promise<void>;
  status(text: string): Promise<void>;
  stopping(status?: string): Promise<void>;
  /** RELOADING=1 (with MONOTONIC_USEC): a config reload began; send ready() when it is done. */
  reloading(status?: string): Promise<void>;
  /** Pings WATCHDOG=1 at half the interval while `isHealthy()` (default: always); returns stop. */
  startWatchdog(isHealthy?: () => boolean): () => void;
}

/** Status text is one field of a newline-separated message: keep it on one line and short. */
const MAX_STATUS_CHARS = 400;
/** Messages waiting behind a slow systemd-notify beyond this are dropped (and logged). */
const MAX_PENDING = 32;
/** Floor for the ping interval, whatever WATCHDOG_USEC says. */
const MIN_WATCHDOG_INTERVAL_MS = 100;
/** systemd-notify gives its barrier 5 s; anything slower is stuck. */
const DEFAULT_SPAWN_TIMEOUT_MS = 10_000;
const FALLBACK_PATH = "/usr/local/bin:/usr/bin:/bin";

/** A `STATUS=` field with the text on one line and bounded. */
export function statusField(text: string): string {
  const oneLine = text.replace(/[\r\n]+/g, " ").trim();
  const bounded = oneLine.length > MAX_STATUS_CHARS ? `${oneLine.slice(0, MAX_STATUS_CHARS - 1)}…` : oneLine;
  return `STATUS=${bounded}`;
}

/** `MONOTONIC_USEC=`: CLOCK_MONOTONIC in µs (what Node's hrtime reads on Linux), sent with RELOADING=1. */
export function monotonicField(now: bigint = process.hrtime.bigint()): string {
  return `MONOTONIC_USEC=${now / 1000n}`;
}

/** The ping interval systemd asks for (half of WATCHDOG_USEC), or undefined for none / not ours. */
export function watchdogIntervalMs(env: NodeJS.ProcessEnv, pid: number): number | undefined {
  const usec = Number(env.WATCHDOG_USEC);
  if (!Number.isSafeInteger(usec) || usec <= 0) return undefined;
  // WATCHDOG_PID names the process the watchdog is for; a child that inherited the
  // variables (e.g. a palaver started by a tool command) must not ping on our behalf.
  const forPid = env.WATCHDOG_PID;
  if (forPid !== undefined && forPid !== "" && Number(forPid) !== pid) return undefined;
  return Math.max(MIN_WATCHDOG_INTERVAL_MS, Math.floor(usec / 2000));
}

/** The transport that runs `systemd-notify -- FIELD...` with NOTIFY_SOCKET set (see the header). */
export function spawnSystemdNotify(options: { command?: string; timeoutMs?: number } = {}): NotifyTransport {
  const command = options.command ?? "systemd-notify";
  const timeoutMs = options.timeoutMs ?? DEFAULT_SPAWN_TIMEOUT_MS;
  return (socket, fields) =>
    new Promise<void>((resolve, reject) => {
      const child = spawn(command, ["--", ...fields], {
        // Only what the tool needs: it must not see our API keys.
        env: { PATH: process.env.PATH ?? FALLBACK_PATH, NOTIFY_SOCKET: socket },
        stdio: ["ignore", "ignore", "pipe"],
        timeout: timeoutMs,
        killSignal: "SIGKILL",
      });
      let stderr = "";
      child.stderr.on("data", (chunk: Buffer) => {
        if (stderr.length < 2000) stderr += chunk.toString();
      });
      child.once("error", (err) =>
        reject(new PalaverError(`cannot run ${command}: ${err.message}`, { cause: err })),
      );
      child.once("close", (code, signal) => {
        if (code === 0) resolve();
        else {
          const how = signal !== null ? `killed by ${signal}` : `exit code ${String(code)}`;
          reject(new PalaverError(`${command} failed (${how})${stderr.trim() ? `: ${stderr.trim()}` : ""}`));
        }
      });
    });
}

/** A notifier bound to the service manager named in `env` (a no-op one when there is none). */
export function createNotifier(options: NotifierOptions = {}): Notifier {
  const env = options.env ?? process.env;
  const log = options.log ?? logger("systemd");
  const socket = env.NOTIFY_SOCKET?.trim() || undefined;
  const interval = socket === undefined ? undefined : watchdogIntervalMs(env, options.pid ?? process.pid);
  if (options.unsetEnvironment) {
    delete env.NOTIFY_SOCKET;
    delete env.WATCHDOG_USEC;
    delete env.WATCHDOG_PID;
  }
  const transport = options.transport ?? spawnSystemdNotify();

  // Sent one after another: separate processes could otherwise deliver STOPPING=1 before READY=1.
  let chain: Promise<void> = Promise.resolve();
  let pending = 0;
  let warned = false;

  const notify = (fields: readonly string[]): Promise<void> => {
    if (socket === undefined) return Promise.resolve();
    if (pending >= MAX_PENDING) {
      log.warn({ fields }, "sd_notify: too many messages waiting for systemd-notify; dropped this one");
      return Promise.resolve();
    }
    pending++;
    const sent = chain.then(async () => {
      try {
        await transport(socket, fields);
        log.debug({ fields }, "sd_notify sent");
      } catch (err) {
        // Warn once: if the tool is missing every watchdog ping fails the same way.
        if (warned) log.debug({ err, fields }, "sd_notify failed");
        else {
          warned = true;
          log.warn(
            { err, fields },
            "sd_notify failed: systemd cannot be told about readiness or liveness " +
              "(is systemd-notify installed and NotifyAccess=all set in the unit?)",
          );
        }
      } finally {
        pending--;
      }
    });
    chain = sent;
    return sent;
  };

  return {
    enabled: socket !== undefined,
    watchdogIntervalMs: interval,
    notify,
    ready: (status) => notify(status === undefined ? ["READY=1"] : ["READY=1", statusField(status)]),
    status: (text) => notify([statusField(text)]),
    stopping: (status) => notify(status === undefined ? ["STOPPING=1"] : ["STOPPING=1", statusField(status)]),
    reloading: (status) => {
      const fields = ["RELOADING=1", monotonicField()];
      return notify(status === undefined ? fields : [...fields, statusField(status)]);
    },
    startWatchdog(isHealthy) {
      if (interval === undefined) return () => undefined;
      let inFlight = false;
      let unhealthyLogged = false;
      const timer = setInterval(() => {
        // A ping still waiting on systemd-notify's barrier: this tick is covered by it.
        if (inFlight) return;
        if (isHealthy !== undefined && !isHealthy()) {
          // Withholding the ping is the point: systemd then restarts a daemon that is stuck.
          if (!unhealthyLogged) log.warn("watchdog: not healthy, withholding WATCHDOG=1");
          unhealthyLogged = true;
          return;
        }
        unhealthyLogged = false;
        inFlight = true;
        void notify(["WATCHDOG=1"]).finally(() => {
          inFlight = false;
        });
      }, interval);
      // The watchdog must never be what keeps the process alive.
      timer.unref();
      return () => clearInterval(timer);
    },
  };
}

// The process-wide notifier used by the gateway, created on first use from process.env.
let shared: Notifier | undefined;
function sharedNotifier(): Notifier {
  shared ??= createNotifier({ unsetEnvironment: true });
  return shared;
}

/** READY=1 (and STATUS= when given): startup is complete. */
export function notifyReady(status?: string): Promise<void> {
  return sharedNotifier().ready(status);
}

/** STATUS=…: one line shown by `systemctl status`. */
export function notifyStatus(text: string): Promise<void> {
  return sharedNotifier().status(text);
}

/** STOPPING=1: shutdown has begun (`systemctl status` shows "deactivating"). */
export function notifyStopping(status?: string): Promise<void> {
  return sharedNotifier().stopping(status);
}

/** RELOADING=1: a reload (SIGHUP) began; call notifyReady() when the new config is in effect. */
export function notifyReloading(status?: string): Promise<void> {
  return sharedNotifier().reloading(status);
}

/** Pings WATCHDOG=1 every WATCHDOG_USEC/2 (no-op without it) until the returned stop is called. */
export function startWatchdog(isHealthy?: () => boolean): () => void {
  return sharedNotifier().startWatchdog(isHealthy);
}
