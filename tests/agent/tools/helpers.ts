import { mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { OutboundMessage } from "../../../src/bus/types.js";
import type { ToolContext } from "../../../src/agent/tools/types.js";

export interface TestContext {
  ctx: ToolContext;
  published: OutboundMessage[];
  controller: AbortController;
}

/** A ToolContext for one turn in the chat `cli:direct`, collecting what the tool publishes. */
export function makeContext(overrides: Partial<ToolContext> = {}): TestContext {
  const published: OutboundMessage[] = [];
  const controller = new AbortController();
  const ctx: ToolContext = {
    workspace: "/nonexistent-workspace",
    channel: "cli",
    chatId: "direct",
    sessionKey: "cli:direct",
    signal: controller.signal,
    publish: (msg) => published.push(msg),
    turn: { sentToOriginChat: false },
    ...overrides,
  };
  return { ctx, published, controller };
}

/** Temp folders (real paths, so /tmp symlinks on macOS do not confuse path checks), removed by cleanup(). */
export class TempDirs {
  private readonly dirs: string[] = [];

  async make(prefix = "palaver-tools-"): Promise<string> {
    const dir = await realpath(await mkdtemp(join(tmpdir(), prefix)));
    this.dirs.push(dir);
    return dir;
  }

  async cleanup(): Promise<void> {
    await Promise.all(this.dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
  }
}

/**
 * A `bwrap` in `dir` that starts the command but confines nothing: it skips
 * its own options up to `--` and runs the rest as the caller. Run by root, it
 * stands for a bubblewrap that could not drop root's powers. Returns its path.
 */
export async function writeUnconfinedBwrap(dir: string): Promise<string> {
  const path = join(dir, "bwrap");
  const script = '#!/bin/sh\nwhile [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n';
  await writeFile(path, script, { mode: 0o755 });
  return path;
}
