/**
 * The file that tells `palaver cron` a gateway runs the jobs of a store (`<jobs.json>.pid`): written
 * when the gateway's scheduler starts, removed at its stop if it is still its own. One process only;
 * a cluster's schedulers write none.
 */
import { readFile, unlink, writeFile } from "node:fs/promises";
import type { Logger } from "../log.js";
import { isProcessAlive } from "./store.js";

export function pidPathOf(storePath: string): string {
  return `${storePath}.pid`;
}

/** Whether a live process (other than this one) runs a started scheduler on this store. */
export async function runningElsewhere(storePath: string): Promise<boolean> {
  const text = await readFile(pidPathOf(storePath), "utf8").catch(() => "");
  const pid = Number(text.trim());
  return Number.isInteger(pid) && pid > 0 && pid !== process.pid && isProcessAlive(pid);
}

export async function announceScheduler(storePath: string, log: Logger): Promise<void> {
  await writeFile(pidPathOf(storePath), String(process.pid), { mode: 0o600 }).catch((err: unknown) =>
    log.warn({ err }, "cron: cannot write the pid file; `palaver cron run` will not see the gateway"),
  );
}

export async function withdrawScheduler(storePath: string): Promise<void> {
  const path = pidPathOf(storePath);
  const owner = await readFile(path, "utf8").catch(() => "");
  if (owner.trim() === String(process.pid)) await unlink(path).catch(() => undefined);
}
