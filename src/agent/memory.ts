/**
 * The two memory files of a workspace (nanobot's layout):
 * memory/MEMORY.md holds long-term facts and is rewritten whole by
 * consolidation; memory/HISTORY.md is an append-only log of timestamped
 * paragraphs that the agent greps to recall past events.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { PalaverError, errorMessage } from "../util/errors.js";
import { writeFailure } from "../util/write-errors.js";
import { appendFilePrivate, mkdirPrivate, replaceFilePrivate, tightenMode } from "../util/private-fs.js";

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
  /**
   * Keeps MEMORY.md as it is before a write and as it is after (recall/versions.ts), so any
   * rewrite can be undone. A failure is the hook's to report: the write goes ahead.
   */
  keepVersion: ((text: string, when: "before" | "after") => Promise<void>) | undefined;
  /** Whether a HISTORY.md left 0644 by an older version was made private yet (once per process). */
  private historyTightened = false;

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

  /** Replaces MEMORY.md atomically (owner-only, 0600): a reader sees the old file or the new one. */
  async writeMemory(text: string): Promise<void> {
    const target = this.paths.memory;
    if (this.keepVersion) await this.keepVersion(await this.readMemory(), "before");
    try {
      await mkdirPrivate(this.paths.dir);
      await replaceFilePrivate(target, text);
    } catch (err) {
      throw writeFailure("the memory file", target, err);
    }
    this.onMemoryWritten?.();
    await this.keepVersion?.(text, "after");
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
      await mkdirPrivate(this.paths.dir);
      if (!this.historyTightened) {
        await tightenMode(this.paths.history);
        this.historyTightened = true;
      }
      // One write with O_APPEND: concurrent entries never interleave mid-paragraph.
      await appendFilePrivate(this.paths.history, `${text}\n\n`);
    } catch (err) {
      throw writeFailure("the history file", this.paths.history, err);
    }
  }
}

function isErrno(err: unknown, code: string): boolean {
  return typeof err === "object" && err !== null && (err as { code?: unknown }).code === code;
}
