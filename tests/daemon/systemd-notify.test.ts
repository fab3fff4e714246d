/**
 * sd_notify: the notifier's logic against a recording transport (fake timers for the
 * watchdog), and the real transport (the systemd-notify tool) against a unix datagram socket
 * standing in for systemd's. Node cannot open a datagram socket, so a small python3 script
 * receives them; those tests skip when python3 or systemd-notify is missing (fail in CI).
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  createNotifier,
  monotonicField,
  notifyReady,
  notifyReloading,
  notifyStatus,
  notifyStopping,
  spawnSystemdNotify,
  startWatchdog,
  statusField,
  watchdogIntervalMs,
  type NotifyTransport,
} from "../../src/daemon/systemd-notify.js";
import { PalaverError } from "../../src/util/errors.js";
import { haveCommand, requireOrSkip } from "../helpers/requires.js";
import { MIN_WAIT_MS } from "../helpers/wait.js";

const ROOT = join(import.meta.dirname, "..", "..");
const TSX = pathToFileURL(join(ROOT, "node_modules", "tsx", "dist", "loader.mjs")).href;

function recorder(): { transport: NotifyTransport; sent: { socket: string; fields: string[] }[] } {
  const sent: { socket: string; fields: string[] }[] = [];
  return {
    sent,
    transport: async (socket, fields) => {
      sent.push({ socket, fields: [...fields] });
    },
  };
}

function capturingLogger(): { log: pino.Logger; lines: { level: number; msg: string }[] } {
  const lines: { level: number; msg: string }[] = [];
  const log = pino(
    { level: "debug" },
    { write: (s: string) => void lines.push(JSON.parse(s) as { level: number; msg: string }) },
  );
  return { log, lines };
}

const WARN = 40;

describe("pure helpers", () => {
  it("keeps STATUS= on one bounded line", () => {
    expect(statusField("ready: 2 channels")).toBe("STATUS=ready: 2 channels");
    expect(statusField(" a\nb\r\nc ")).toBe("STATUS=a b c");
    const long = statusField("x".repeat(1000));
    expect(long.length).toBeLessThanOrEqual("STATUS=".length + 400);
    expect(long.endsWith("…")).toBe(true);
  });

  it("stamps RELOADING=1 with CLOCK_MONOTONIC in microseconds", () => {
    expect(monotonicField(123_456_789_000n)).toBe("MONOTONIC_USEC=123456789");
    expect(monotonicField()).toMatch(/^MONOTONIC_USEC=\d+$/);
  });

  it("pings at half of WATCHDOG_USEC, only for the process it names", () => {
    expect(watchdogIntervalMs({ WATCHDOG_USEC: "60000000" }, 42)).toBe(30_000);
    expect(watchdogIntervalMs({ WATCHDOG_USEC: "60000000", WATCHDOG_PID: "42" }, 42)).toBe(30_000);
    expect(watchdogIntervalMs({ WATCHDOG_USEC: "60000000", WATCHDOG_PID: "43" }, 42)).toBeUndefined();
    expect(watchdogIntervalMs({}, 42)).toBeUndefined();
    expect(watchdogIntervalMs({ WATCHDOG_USEC: "0" }, 42)).toBeUndefined();
    expect(watchdogIntervalMs({ WATCHDOG_USEC: "soon" }, 42)).toBeUndefined();
    expect(watchdogIntervalMs({ WATCHDOG_USEC: "10" }, 42)).toBe(100); // floor
  });
});

describe("createNotifier", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("is a no-op without NOTIFY_SOCKET, watchdog included", async () => {
    vi.useFakeTimers();
    const { transport, sent } = recorder();
    const n = createNotifier({ env: { WATCHDOG_USEC: "1000000" }, transport });
    expect(n.enabled).toBe(false);
    expect(n.watchdogIntervalMs).toBeUndefined();
    await n.ready("up");
    await n.status("busy");
    await n.stopping();
    const stop = n.startWatchdog();
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(10_000);
    stop();
    expect(sent).toEqual([]);
  });

  it("sends READY, STATUS, STOPPING and RELOADING fields to the socket, in call order", async () => {
    let release: () => void = () => undefined;
    const sent: string[][] = [];
    const transport: NotifyTransport = async (_socket, fields) => {
      // The first message is slow: the second must still come after it.
      if (sent.length === 0) await new Promise<void>((r) => (release = r));
      sent.push([...fields]);
    };
    const n = createNotifier({ env: { NOTIFY_SOCKET: "/run/test.sock" }, transport });
    expect(n.enabled).toBe(true);
    const ready = n.ready("2 channels\nrunning");
    const stopping = n.stopping("bye");
    await new Promise((r) => setImmediate(r));
    expect(sent).toEqual([]);
    release();
    await Promise.all([ready, stopping]);
    await n.status("idle");
    await n.reloading("reloading config");
    expect(sent.slice(0, 3)).toEqual([
      ["READY=1", "STATUS=2 channels running"],
      ["STOPPING=1", "STATUS=bye"],
      ["STATUS=idle"],
    ]);
    expect(sent[3]).toEqual([
      "RELOADING=1",
      expect.stringMatching(/^MONOTONIC_USEC=\d+$/),
      "STATUS=reloading config",
    ]);
  });

  it("passes the socket from the environment and can take the variables out of it", async () => {
    const { transport, sent } = recorder();
    const env: NodeJS.ProcessEnv = {
      NOTIFY_SOCKET: "@abstract",
      WATCHDOG_USEC: "2000000",
      WATCHDOG_PID: "7",
      KEEP: "1",
    };
    const n = createNotifier({ env, transport, pid: 7, unsetEnvironment: true });
    expect(env).toEqual({ KEEP: "1" });
    expect(n.watchdogIntervalMs).toBe(1000);
    await n.ready();
    expect(sent).toEqual([{ socket: "@abstract", fields: ["READY=1"] }]);
  });

  it("pings WATCHDOG=1 every half interval until stopped", async () => {
    vi.useFakeTimers();
    const { transport, sent } = recorder();
    const n = createNotifier({ env: { NOTIFY_SOCKET: "/s", WATCHDOG_USEC: "60000000" }, transport });
    const stop = n.startWatchdog();
    await vi.advanceTimersByTimeAsync(29_999);
    expect(sent).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(sent).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(90_000);
    expect(sent).toHaveLength(4);
    expect(sent.every((m) => m.fields.join() === "WATCHDOG=1")).toBe(true);
    stop();
    stop(); // idempotent
    await vi.advanceTimersByTimeAsync(120_000);
    expect(sent).toHaveLength(4);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("does not ping for another process's watchdog", async () => {
    vi.useFakeTimers();
    const { transport, sent } = recorder();
    const n = createNotifier({
      env: { NOTIFY_SOCKET: "/s", WATCHDOG_USEC: "1000000", WATCHDOG_PID: "1" },
      transport,
      pid: 2,
    });
    n.startWatchdog();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(sent).toEqual([]);
  });

  it("skips a tick while the previous ping is still in flight", async () => {
    vi.useFakeTimers();
    const releases: (() => void)[] = [];
    const transport: NotifyTransport = () => new Promise<void>((r) => releases.push(r));
    const n = createNotifier({ env: { NOTIFY_SOCKET: "/s", WATCHDOG_USEC: "2000000" }, transport });
    const stop = n.startWatchdog();
    await vi.advanceTimersByTimeAsync(3_000);
    expect(releases).toHaveLength(1);
    releases[0]!();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(releases).toHaveLength(2);
    stop();
    releases[1]!();
  });

  it("withholds pings while unhealthy, so systemd restarts a stuck daemon", async () => {
    vi.useFakeTimers();
    const { transport, sent } = recorder();
    const { log, lines } = capturingLogger();
    let healthy = false;
    const n = createNotifier({ env: { NOTIFY_SOCKET: "/s", WATCHDOG_USEC: "2000000" }, transport, log });
    const stop = n.startWatchdog(() => healthy);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(sent).toHaveLength(0);
    expect(lines.filter((l) => l.level === WARN && /withholding/.test(l.msg))).toHaveLength(1);
    healthy = true;
    await vi.advanceTimersByTimeAsync(1_000);
    expect(sent).toHaveLength(1);
    stop();
  });

  it("logs a failed notification once and never rejects", async () => {
    const { log, lines } = capturingLogger();
    const n = createNotifier({
      env: { NOTIFY_SOCKET: "/s" },
      transport: () => Promise.reject(new PalaverError("boom")),
      log,
    });
    await expect(n.ready()).resolves.toBeUndefined();
    await expect(n.status("x")).resolves.toBeUndefined();
    const warns = lines.filter((l) => l.level === WARN);
    expect(warns).toHaveLength(1);
    expect(warns[0]!.msg).toMatch(/sd_notify failed/);
  });

  it("the process-wide functions are no-ops when systemd did not start us", async () => {
    expect(process.env.NOTIFY_SOCKET).toBeUndefined();
    await expect(notifyReady("up")).resolves.toBeUndefined();
    await expect(notifyStatus("busy")).resolves.toBeUndefined();
    await expect(notifyStopping()).resolves.toBeUndefined();
    await expect(notifyReloading()).resolves.toBeUndefined();
    vi.useFakeTimers();
    const stop = startWatchdog();
    expect(vi.getTimerCount()).toBe(0);
    stop();
  });
});

describe("spawnSystemdNotify", () => {
  it("rejects with the reason when the tool cannot run", async () => {
    const send = spawnSystemdNotify({ command: "/nonexistent/systemd-notify" });
    await expect(send("/s", ["READY=1"])).rejects.toThrow(/cannot run \/nonexistent\/systemd-notify/);
  });
});

const CANNOT_RECEIVE = requireOrSkip(
  ["python3", "systemd-notify"]
    .filter((c) => !haveCommand(c))
    .map(
      (c) =>
        `the real sd_notify transport tests need ${c} (apt-get install ${c === "python3" ? c : "systemd"})`,
    )
    .join("; "),
);

// Binds a unix datagram socket and prints each datagram as a JSON string, one per line.
// recv() without room for ancillary data makes the kernel close any passed fds, which
// releases systemd-notify's BARRIER=1 wait, as systemd does after reading a message.
const RECEIVER = `
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
print("listening", flush=True)
while True:
    print(json.dumps(s.recv(65536).decode()), flush=True)
`;

describe.skipIf(CANNOT_RECEIVE)(
  "through systemd-notify to a datagram socket (needs python3 and systemd-notify)",
  () => {
    let dir: string;
    let socketPath: string;
    let receiver: ChildProcessWithoutNullStreams;
    let datagrams: string[];

    beforeEach(async () => {
      dir = await mkdtemp(join(tmpdir(), "palaver-notify-"));
      socketPath = join(dir, "notify.sock");
      datagrams = [];
      receiver = spawn("python3", ["-c", RECEIVER, socketPath]);
      await new Promise<void>((resolve, reject) => {
        let buffer = "";
        const timer = setTimeout(() => reject(new Error("receiver did not start")), 10_000);
        receiver.once("error", reject);
        receiver.stdout.on("data", (chunk: Buffer) => {
          buffer += chunk.toString();
          const lines = buffer.split("\n");
          buffer = lines.pop() ?? "";
          for (const line of lines) {
            if (line === "listening") {
              clearTimeout(timer);
              resolve();
            } else datagrams.push(JSON.parse(line) as string);
          }
        });
      });
    });
    afterEach(async () => {
      receiver.kill("SIGKILL");
      await rm(dir, { recursive: true, force: true });
    });

    /** Datagrams palaver sent, without systemd-notify's own BARRIER=1 handshakes. */
    const messages = () => datagrams.filter((d) => d !== "BARRIER=1");

    /** Resolves once the datagrams satisfy `predicate`, checked as each arrives (bounded: a hang still ends). */
    function until(predicate: () => boolean, what: string): Promise<void> {
      return new Promise((resolve, reject) => {
        // Registered after the parser in beforeEach, so it sees each datagram already recorded.
        const check = () => {
          if (!predicate()) return;
          done();
          resolve();
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`timed out waiting for ${what}; got ${JSON.stringify(datagrams)}`));
        }, MIN_WAIT_MS);
        const done = () => {
          clearTimeout(timer);
          receiver.stdout.off("data", check);
        };
        receiver.stdout.on("data", check);
        check();
      });
    }

    it("delivers READY=1, STATUS=, RELOADING=1, WATCHDOG=1 and STOPPING=1 in order", async () => {
      // Only the interval timers are fake: the transport's process and socket I/O stay real.
      vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
      try {
        const { log, lines } = capturingLogger();
        const n = createNotifier({
          env: { NOTIFY_SOCKET: socketPath, WATCHDOG_USEC: "60000000", WATCHDOG_PID: String(process.pid) },
          log,
        });
        await n.ready("palaver: 1 channel running");
        await n.status("busy: 1 turn");
        await n.reloading();
        await n.ready();
        const stop = n.startWatchdog();
        vi.advanceTimersByTime(30_000);
        await until(() => messages().includes("WATCHDOG=1"), "the watchdog ping");
        stop();
        await n.stopping();
        await until(() => messages().length >= 6, "STOPPING=1");
        expect(messages()).toEqual([
          "READY=1\nSTATUS=palaver: 1 channel running",
          "STATUS=busy: 1 turn",
          expect.stringMatching(/^RELOADING=1\nMONOTONIC_USEC=\d+$/),
          "READY=1",
          "WATCHDOG=1",
          "STOPPING=1",
        ]);
        // systemd-notify exited 0 each time: its BARRIER=1 handshake completed.
        expect(lines.filter((l) => l.level >= WARN)).toEqual([]);
      } finally {
        vi.useRealTimers();
      }
    });

    it("the process-wide notifier reads NOTIFY_SOCKET and hides it from later child processes", async () => {
      const script = [
        `import { notifyReady } from ${JSON.stringify(pathToFileURL(join(ROOT, "src/daemon/systemd-notify.ts")).href)};`,
        `await notifyReady("from the default notifier");`,
        `process.stdout.write(process.env.NOTIFY_SOCKET ?? "unset");`,
      ].join("\n");
      const child = spawn(process.execPath, ["--import", TSX, "--input-type=module", "-e", script], {
        env: { PATH: process.env.PATH, NOTIFY_SOCKET: socketPath, PALAVER_LOG_LEVEL: "silent" },
        stdio: ["ignore", "pipe", "pipe"],
        timeout: 15_000,
      });
      let stdout = "";
      child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
      const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
      expect(code).toBe(0);
      expect(stdout).toBe("unset");
      await until(() => messages().length >= 1, "READY=1");
      expect(messages()).toEqual(["READY=1\nSTATUS=from the default notifier"]);
    });
  },
);
