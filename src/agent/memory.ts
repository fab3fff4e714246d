/**
 * The two memory files of a workspace (nanobot's layout):
 * memory/MEMORY.md holds long-term facts and is rewritten whole by
 * consolidation; memory/HISTORY.md is an append-only log of timestamped
 * paragraphs that the agent greps to recall past events.
 */
import { appendFile, mkdir, open, readFile, rename, unlink } from "node:fs/promises";
import { join } from "node:path";
import { PalaverError, errorMessage } from "../util/errors.js";

export interface MemoryPaths {
  dir: string;
  memory: string;
  history: string;
}

const pad = (n: number): string => String(n).padStart(2, "0");

/** "[YYYY-MM-DD HH:MM] " in local time: the prefix the agent is told to grep for. */
export function historyStamp(when: Date): string {
  return (
    `[${when.getFullYear()}-${pad(when.getMonth() + 1)}-${pad(when.getDate())} ` +
    `${pad(when.getHours())}:${pad(when.getMinutes())}]`
  );
}

const STAMPED = /^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}\]/;

export class MemoryFiles {
  readonly paths: MemoryPaths;
  /** Called after MEMORY.md was replaced (the context builder drops its cached prompt). */
  onMemoryWritten: (() => void) | undefined;

  constructor(readonly workspace: string) {
    const dir = join(workspace, "memory");
    this.paths = { dir, memory: join(dir, "MEMORY.md"), history: join(dir, "HISTORY.md") };
  }

  /** MEMORY.md's text, "" when there is none yet. */
  async readMemory(): Promise<string> {
    try {
      return await readFile(this.paths.memory, "utf8");
    } catch (err) {
      if (isErrno(err, "ENOENT")) return "";
      throw new PalaverError(`cannot read ${this.paths.memory}: ${errorMessage(err)}`, { cause: err });
    }
  }

  /** Replaces MEMORY.md atomically: a reader sees the old file or the new one, never half of it. */
  async writeMemory(text: string): Promise<void> {
    const target = this.paths.memory;
    const tmp = `${target}.${process.pid}.${Date.now()}.${Math.random().toString(36).slice(2)}.tmp`;
    try {
      await mkdir(this.paths.dir, { recursive: true });
      const fh = await open(tmp, "w");
      try {
        await fh.writeFile(text, "utf8");
        await fh.sync();
      } finally {
        await fh.close();
      }
      await rename(tmp, target);
    } catch (err) {
      await unlink(tmp).catch(() => undefined);
      throw new PalaverError(`cannot write ${target}: ${errorMessage(err)}`, { cause: err });
    }
    this.onMemoryWritten?.();
  }

  /**
   * Appends "[YYYY-MM-DD HH:MM] entry" as its own paragraph to HISTORY.md.
   * An entry that already starts with such a stamp (nanobot's consolidation
   * prompt asks the model for one) keeps its own.
   */
  async appendHistory(entry: string, when: Date = new Date()): Promise<void> {
    const trimmed = entry.trim();
    if (trimmed === "") return;
    const text = STAMPED.test(trimmed) ? trimmed : `${historyStamp(when)} ${trimmed}`;
    try {
      await mkdir(this.paths.dir, { recursive: true });
      // One write with O_APPEND: concurrent entries never interleave mid-paragraph.
      await appendFile(this.paths.history, `${text}\n\n`, "utf8");
    } catch (err) {
      throw new PalaverError(`cannot append to ${this.paths.history}: ${errorMessage(err)}`, { cause: err });
    }
  }
}

function isErrno(err: unknown, code: string): boolean {
  return typeof err === "object" && err !== null && (err as { code?: unknown }).code === code;
}
