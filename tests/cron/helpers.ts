import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";

/** A logger whose lines are kept (parsed) for assertions. */

export { captureLog } from "../helpers/log.js";

export const silentLog = (): pino.Logger => pino({ level: "silent" });

/** Temp folders removed by cleanup(). */
export class TempDirs {
  private readonly dirs: string[] = [];

  async make(prefix = "palaver-cron-"): Promise<string> {
    const dir = await mkdtemp(join(tmpdir(), prefix));
    this.dirs.push(dir);
    return dir;
  }

  async cleanup(): Promise<void> {
    await Promise.all(this.dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
  }
}
