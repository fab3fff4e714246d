/**
 * A second process for tests/daemon/lock.test.ts: takes the StateLock of the
 * folder in argv[2] and reports on stdout, one line each, "held" or
 * "refused <message>". Holding, it releases on a "release" line on stdin and
 * then reports "released"; it exits when stdin closes.
 */
import { createInterface } from "node:readline";
import { StateFolderInUseError, StateLock } from "../../src/daemon/lock.js";

const dir = process.argv[2]!;
let lock: StateLock | null = null;
try {
  lock = StateLock.acquire(dir);
  process.stdout.write(lock ? "held\n" : "unprotected\n");
} catch (err) {
  if (!(err instanceof StateFolderInUseError)) throw err;
  process.stdout.write(`refused ${err.message}\n`);
}
for await (const line of createInterface({ input: process.stdin })) {
  if (line === "release" && lock) {
    lock.release();
    process.stdout.write("released\n");
  }
}
