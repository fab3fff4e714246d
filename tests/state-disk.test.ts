/**
 * Issue 41: every state file on a full and on a read-only disk, a real one (a small tmpfs, see
 * tests/helpers/small-disk.ts): sessions, MEMORY.md and HISTORY.md, the cron jobs file, the
 * pairing file and downloaded media. What was written before is never lost, the failed write
 * says which file and what to do, and the next write after the disk is mended succeeds.
 * The journal has its own test (tests/daemon/journal.test.ts).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MemoryFiles } from "../src/agent/memory.js";
import { downloadFile } from "../src/channels/media.js";
import { CronStore } from "../src/cron/store.js";
import type { CronJob } from "../src/cron/types.js";
import { PairingStore, pairingPath } from "../src/pairing/store.js";
import { SessionStore } from "../src/sessions/store.js";
import { requireOrSkip } from "./helpers/requires.js";
import { mountSmallDisk, smallDiskUnavailable, type SmallDisk } from "./helpers/small-disk.js";

const skip = requireOrSkip(smallDiskUnavailable());
const silent = pino({ level: "silent" });
// Longer than a block, so a write needs a new one even where the last block has room left.
const BIG = "x".repeat(10_000);

interface Fault {
  name: string;
  /** The words the error must use. */
  says: RegExp;
  /** What to do, as the error tells it. */
  fix: RegExp;
  apply(disk: SmallDisk): void;
  mend(disk: SmallDisk): void;
}

const FAULTS: Fault[] = [
  {
    name: "a full disk",
    says: /disk full \(ENOSPC\)/,
    fix: /free space on the disk/,
    apply: (d) => d.fill(),
    mend: (d) => d.free(),
  },
  {
    name: "a read-only disk",
    says: /read-only \(EROFS\)/,
    fix: /remount it read-write/,
    apply: (d) => d.readOnly(true),
    mend: (d) => d.readOnly(false),
  },
];

function cronJob(id: string): CronJob {
  return {
    id,
    name: id,
    enabled: true,
    schedule: { kind: "every", atMs: null, everyMs: 3_600_000, expr: null, tz: null },
    payload: { kind: "agent_turn", message: id, deliver: true, channel: "telegram", to: "42" },
    state: { nextRunAtMs: null, lastRunAtMs: null, lastStatus: null, lastError: null },
    createdAtMs: 1,
    updatedAtMs: 1,
    deleteAfterRun: false,
  };
}

describe.skipIf(skip).each(FAULTS)("state files on $name", (fault) => {
  let disk: SmallDisk;
  beforeEach(() => {
    disk = mountSmallDisk();
  });
  afterEach(() => disk.close());

  /** The error of `write` while the fault is on, checked to name `file` and say what to do. */
  async function failsClearly(write: () => unknown, file: string): Promise<void> {
    fault.apply(disk);
    try {
      let error: unknown;
      try {
        await write();
      } catch (err) {
        error = err;
      }
      expect(error, "the write must fail").toBeInstanceOf(Error);
      const message = (error as Error).message;
      expect(message).toContain(file);
      expect(message).toMatch(fault.says);
      expect(message).toMatch(fault.fix);
    } finally {
      fault.mend(disk);
    }
  }

  it("sessions: appended messages stay, the failed append names the file, the next one works", async () => {
    const dir = join(disk.dir, "sessions");
    const store = new SessionStore(dir, silent);
    const session = await store.get("telegram:42");
    await store.append(session, [{ role: "user", content: "before" }]);
    // A restart meets the fault: nothing held open from before (a read-only remount needs that too).
    await store.close();
    const next = new SessionStore(dir, silent);
    const again = await next.get("telegram:42");
    await failsClearly(
      () => next.append(again, [{ role: "user", content: BIG }]),
      store.pathFor("telegram:42"),
    );
    await next.append(again, [{ role: "assistant", content: "after" }]);
    await next.close();
    const reread = await new SessionStore(dir, silent).get("telegram:42");
    const texts = reread.messages.map((m) => m.content);
    expect(texts[0]).toBe("before");
    expect(texts.at(-1)).toBe("after");
  });

  it("memory: MEMORY.md keeps its last text, HISTORY.md its entries; both write again once mended", async () => {
    const memory = new MemoryFiles(join(disk.dir, "ws"));
    await memory.writeMemory("first facts");
    await memory.appendHistory("first entry");
    await failsClearly(() => memory.writeMemory(BIG), join(disk.dir, "ws", "memory", "MEMORY.md"));
    expect(await memory.readMemory()).toBe("first facts");
    await failsClearly(() => memory.appendHistory(BIG), join(disk.dir, "ws", "memory", "HISTORY.md"));
    await memory.writeMemory("second facts");
    await memory.appendHistory("second entry");
    expect(await memory.readMemory()).toBe("second facts");
    const { readFile } = await import("node:fs/promises");
    const history = await readFile(join(disk.dir, "ws", "memory", "HISTORY.md"), "utf8");
    expect(history).toContain("first entry");
    expect(history).toContain("second entry");
  });

  it("the cron jobs file keeps its jobs, and takes the refused one once mended", async () => {
    const path = join(disk.dir, "cron", "jobs.json");
    const store = new CronStore(path, { log: silent });
    await store.update((snap) => void snap.jobs.push(cronJob("kept")));
    await failsClearly(() => store.update((snap) => void snap.jobs.push(cronJob(BIG.slice(0, 5000)))), path);
    expect((await store.read()).jobs.map((j) => j.id)).toEqual(["kept"]);
    await store.update((snap) => void snap.jobs.push(cronJob("later")));
    expect((await new CronStore(path, { log: silent }).read()).jobs.map((j) => j.id)).toEqual([
      "kept",
      "later",
    ]);
  });

  it("the pairing file keeps its codes, and takes the refused one once mended", async () => {
    const path = pairingPath(disk.dir);
    const store = new PairingStore(path, { log: silent });
    const first = await store.request("telegram", "1", "1");
    // Enough pending codes that the file outgrows its block: the next write needs a new one.
    for (let i = 2; i < 60; i++) await store.request(`p${i}`, String(i), String(i));
    await failsClearly(() => store.request("telegram", "x", "x"), path);
    const reread = new PairingStore(path, { log: silent });
    expect(reread.pending().map((p) => p.code)).toContain(first.code);
    expect(reread.pending().some((p) => p.senderId === "x")).toBe(false);
    await store.request("telegram", "y", "y");
    expect(new PairingStore(path, { log: silent }).pending().some((p) => p.senderId === "y")).toBe(true);
  });

  describe("media", () => {
    let server: Server;
    let url: string;
    beforeEach(async () => {
      server = createServer((_req, res) => res.end(Buffer.alloc(200_000, 1)));
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/file`;
    });
    afterEach(() => new Promise<void>((resolve) => server.close(() => resolve())));

    it("a download names the file, leaves no part behind, and works once mended", async () => {
      const folder = join(disk.dir, "ws", "media", "telegram", "42");
      const dest = join(folder, "photo.jpg");
      await downloadFile({ url, dest: join(folder, "earlier.jpg"), maxBytes: 1_000_000 });
      await failsClearly(() => downloadFile({ url, dest, maxBytes: 1_000_000 }), dest);
      expect(readdirSync(folder)).toEqual(["earlier.jpg"]);
      await downloadFile({ url, dest, maxBytes: 1_000_000 });
      expect(existsSync(dest)).toBe(true);
    });
  });
});
