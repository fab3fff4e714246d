import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runningGatewayPid, StateFolderInUseError, StateLock } from "../../src/daemon/lock.js";
import { ConfigError } from "../../src/util/errors.js";
import { startCli } from "../helpers/cli.js";
import { captureLog } from "../helpers/log.js";
import { waitFor } from "../helpers/wait.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-lock-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A pid that belonged to a process which has exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"]);
  return Number(child.stdout.toString());
}

describe("StateLock", () => {
  it("lets one holder in, refuses a second while it lives, and is free again once released", () => {
    const { log } = captureLog();
    const lock = StateLock.acquire(dir, log)!;
    expect(existsSync(lock.path)).toBe(true);
    let refusal: unknown;
    try {
      StateLock.acquire(dir, log);
    } catch (err) {
      refusal = err;
    }
    expect(refusal).toBeInstanceOf(StateFolderInUseError);
    expect(refusal).toBeInstanceOf(ConfigError); // the CLI exits 78 on it
    expect((refusal as Error).message).toBe(
      `another palaver gateway (pid ${process.pid}) uses ${dir}; stop it first, or give this one its own config folder (--config)`,
    );
    lock.release();
    lock.release(); // harmless
    expect(existsSync(lock.path)).toBe(false);
    StateLock.acquire(dir, log)!.release();
  });

  it("takes over the lock of a gateway that was killed", async () => {
    const { log, lines } = captureLog();
    const pid = deadPid();
    await writeFile(join(dir, "gateway.lock"), JSON.stringify({ pid }));
    const lock = StateLock.acquire(dir, log)!;
    expect(JSON.parse(await readFile(lock.path, "utf8"))).toMatchObject({ pid: process.pid });
    expect(lines.some((l) => l.msg?.startsWith("removed a stale gateway lock") && l.stalePid === pid)).toBe(
      true,
    );
    lock.release();
  });

  it("takes over a lock whose pid now belongs to another process (pid reuse), and an empty or garbled one", async () => {
    const { log } = captureLog();
    // Our own pid, but a start time that is not ours: the gateway that wrote it is gone and the pid was reused.
    await writeFile(join(dir, "gateway.lock"), JSON.stringify({ pid: process.pid, startTime: "1" }));
    StateLock.acquire(dir, log)!.release();
    await writeFile(join(dir, "gateway.lock"), "");
    StateLock.acquire(dir, log)!.release();
    await writeFile(join(dir, "gateway.lock"), "{not json");
    StateLock.acquire(dir, log)!.release();
  });
});

/** The start time of `pid` as the lock records it: field 22 of /proc/<pid>/stat. */
function startTimeOf(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]!;
}

/** tests/daemon/lock-holder.ts in its own process, taking the lock of `stateDir`. */
function startHolder(stateDir: string) {
  const running = startCli([stateDir], { cwd: stateDir, entry: join(import.meta.dirname, "lock-holder.ts") });
  return {
    ...running,
    /** Resolves with the holder's stdout once it has printed `line`. */
    async said(line: string): Promise<string> {
      await waitFor(() => running.stdout.includes(line), undefined, `lock holder to say "${line}"`);
      return running.stdout;
    },
  };
}

describe("StateLock across processes", () => {
  it("writes the holder's pid and start time to a private gateway.lock", async () => {
    const lock = StateLock.acquire(dir, captureLog().log)!;
    expect(lock.path).toBe(join(dir, "gateway.lock"));
    expect(await readFile(lock.path, "utf8")).toBe(
      `{"pid":${process.pid},"startTime":"${startTimeOf(process.pid)}"}\n`,
    );
    expect(statSync(lock.path).mode & 0o777).toBe(0o600);
    expect(runningGatewayPid(dir)).toBe(process.pid);
    lock.release();
    expect(runningGatewayPid(dir)).toBeNull();
  });

  it("refuses this process while another holds the lock, naming its pid, and lets it in once that one releases", async () => {
    const holder = startHolder(dir);
    try {
      await holder.said("held\n");
      const held = JSON.parse(await readFile(join(dir, "gateway.lock"), "utf8")) as unknown;
      expect(held).toEqual({ pid: holder.child.pid, startTime: startTimeOf(holder.child.pid!) });
      expect(() => StateLock.acquire(dir, captureLog().log)).toThrow(
        `another palaver gateway (pid ${holder.child.pid}) uses ${dir}`,
      );
      holder.child.stdin.write("release\n");
      await holder.said("released\n");
      expect(existsSync(join(dir, "gateway.lock"))).toBe(false);
      StateLock.acquire(dir, captureLog().log)!.release();
    } finally {
      holder.child.stdin.end();
      await holder.exited;
    }
  });

  it("refuses another process while this one holds the lock, naming this pid", async () => {
    const lock = StateLock.acquire(dir, captureLog().log)!;
    const other = startHolder(dir);
    try {
      const said = await other.said("\n");
      expect(said).toBe(
        `refused another palaver gateway (pid ${process.pid}) uses ${dir}; stop it first, or give this one its own config folder (--config)\n`,
      );
      // The refusal left our lock as it was.
      expect(JSON.parse(await readFile(lock.path, "utf8"))).toMatchObject({ pid: process.pid });
    } finally {
      other.child.stdin.end();
      await other.exited;
      lock.release();
    }
  });

  it("takes over the lock of a holder process that was killed without releasing it", async () => {
    const holder = startHolder(dir);
    await holder.said("held\n");
    const pid = holder.child.pid!;
    holder.child.kill("SIGKILL"); // no exit handlers run: the lock stays behind
    await holder.exited;
    expect(JSON.parse(await readFile(join(dir, "gateway.lock"), "utf8"))).toMatchObject({ pid });

    const { log, lines } = captureLog();
    const lock = StateLock.acquire(dir, log)!;
    expect(JSON.parse(await readFile(lock.path, "utf8"))).toMatchObject({ pid: process.pid });
    expect(
      lines.filter((l) => l.msg?.startsWith("removed a stale gateway lock")).map((l) => l.stalePid),
    ).toEqual([pid]);
    lock.release();
  });
});
