/**
 * MCP for the agent, loaded only when configured. With no server under tools.mcpServers the MCP
 * SDK (with its ajv and zod-to-json-schema, the largest part of a Telegram-only start) is never
 * imported; with servers, manager.ts is imported in the background and does the work. Only types
 * come from manager.ts here, so this file costs nothing to load.
 */
import type { McpManager, McpManagerOptions, McpServerReport } from "./manager.js";
import { logger } from "../log.js";

/** What the agent uses of the MCP servers. */
export type McpTools = Pick<McpManager, "startInBackground" | "ensureReady" | "status" | "shutdown">;

const NO_MCP: McpTools = {
  startInBackground: () => undefined,
  ensureReady: () => Promise.resolve(),
  status: () => [],
  shutdown: () => Promise.resolve(),
};

/** The configured servers' manager, or a no-op when there are none (the SDK is not loaded then). */
export function loadMcp(opts: McpManagerOptions): McpTools {
  return Object.keys(opts.servers).length === 0 ? NO_MCP : new LazyMcp(opts);
}

class LazyMcp implements McpTools {
  private readonly manager: Promise<McpManager>;
  private loaded: McpManager | undefined;

  constructor(private readonly opts: McpManagerOptions) {
    this.manager = import("./manager.js").then(({ McpManager }) => {
      this.loaded = new McpManager(opts);
      return this.loaded;
    });
  }

  startInBackground(): void {
    this.manager.then(
      (m) => m.startInBackground(),
      (err: unknown) => (this.opts.log ?? logger("mcp")).error({ err }, "could not load the MCP client"),
    );
  }

  async ensureReady(timeoutMs: number): Promise<void> {
    const started = Date.now();
    const manager = await this.manager.catch(() => undefined); // logged by startInBackground
    await manager?.ensureReady(timeoutMs - (Date.now() - started));
  }

  status(): McpServerReport[] {
    // Until the import is done every server is as it is before its first start.
    return (
      this.loaded?.status() ??
      Object.keys(this.opts.servers).map((name) => ({ name, state: "idle" as const, tools: [] }))
    );
  }

  async shutdown(): Promise<void> {
    await (await this.manager.catch(() => undefined))?.shutdown();
  }
}
