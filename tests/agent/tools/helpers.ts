import { mkdtemp, realpath, rm } from "node:fs/promises";
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
