import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { StateFolderInUseError, StateLock } from "../../src/daemon/lock.js";
import { ConfigError } from "../../src/util/errors.js";
import { captureLog } from "../helpers/log.js";

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
