/**
 * A real small disk for state-file tests: a 2 MB tmpfs mounted on a temp folder (root only, as in
 * CI), which fill() makes full (ENOSPC for any write that needs a new block), free() empties
 * again, and readOnly() remounts read-only (EROFS) and back. tests/helpers/full-disk.ts fakes a
 * full disk inside the journal's file layer instead; this one is the kernel's own.
 */
import { spawnSync } from "node:child_process";
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface SmallDisk {
  /** The mount point: put the state files under it. */
  dir: string;
  /** Fills every free block (a filler file). */
  fill(): void;
  /** Removes the filler: space returns. */
  free(): void;
  /** Remounts read-only (true) or read-write (false). */
  readOnly(on: boolean): void;
  /** Unmounts and removes the mount point. */
  close(): void;
}

function run(args: string[]): string | undefined {
  const r = spawnSync(args[0]!, args.slice(1), { encoding: "utf8" });
  return r.status === 0 ? undefined : `${args.join(" ")}: ${(r.stderr || r.error?.message || "").trim()}`;
}

/** Why no small disk can be mounted here ("" when it can): mounting needs root. */
export function smallDiskUnavailable(): string {
  if (process.getuid?.() !== 0) return "mounting a small tmpfs needs root";
  const probe = mkdtempSync(join(tmpdir(), "palaver-disk-probe-"));
  try {
    const problem = run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", probe]);
    if (problem) return `cannot mount a tmpfs: ${problem}`;
    run(["umount", probe]);
    return "";
  } finally {
    rmSync(probe, { recursive: true, force: true });
  }
}

export function mountSmallDisk(): SmallDisk {
  const dir = mkdtempSync(join(tmpdir(), "palaver-small-disk-"));
  const problem = run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", dir]);
  if (problem) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(problem);
  }
  const filler = join(dir, ".filler");
  const must = (args: string[]) => {
    const failed = run(args);
    if (failed) throw new Error(failed);
  };
  return {
    dir,
    fill() {
      const fd = openSync(filler, "a");
      const block = Buffer.alloc(64 * 1024);
      try {
        // Big blocks, then single bytes: nothing is left but the unused ends of other files' blocks.
        for (const chunk of [block, block.subarray(0, 1)]) {
          for (;;) {
            try {
              writeSync(fd, chunk);
            } catch (err) {
              if ((err as NodeJS.ErrnoException).code === "ENOSPC") break;
              throw err;
            }
          }
        }
      } finally {
        closeSync(fd);
      }
    },
    free() {
      rmSync(filler, { force: true });
    },
    readOnly(on) {
      must(["mount", "-o", `remount,${on ? "ro" : "rw"}`, dir]);
    },
    close() {
      run(["umount", "-l", dir]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
