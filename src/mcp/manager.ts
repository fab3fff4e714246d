/**
 * All configured MCP servers: starts them (in the background, or lazily before
 * a turn), keeps their tools registered in the agent's ToolRegistry as
 * `mcp_<server>_<tool>` in step with each server's tool list, turns calls and
 * results into text for the model, and shuts every server down.
 */
import { settleWithin } from "../util/timeout.js";
import type { ToolRegistry } from "../agent/tools/registry.js";
import type { Tool, ToolContext } from "../agent/tools/types.js";
import { logger, type Logger } from "../log.js";
import { describeCallError, formatCallResult, inputParameters, mcpToolName, toolAllowed } from "./convert.js";
import { saveResultMedia } from "./media.js";
import { chatMediaDir } from "../util/chat-folders.js";
import { McpServerConnection, type McpServerConfig, type McpServerStatus, type McpTool } from "./server.js";

export type { McpServerConfig };

export interface McpManagerOptions {
  servers: Record<string, McpServerConfig>;
  registry: ToolRegistry;
  /** Where `${VAR}` in env and headers is read from (default process.env). */
  env?: NodeJS.ProcessEnv;
  log?: Logger;
  /** Relative `cwd`s are inside it, and images/audio/blobs from tools are saved to its media/ folder. */
  workspace?: string;
  /** One tool result longer than this keeps its head and tail (default 16 000 characters). */
  maxResultChars?: number;
  /** Bound on starting one server (default 30 s). */
  connectTimeoutMs?: number;
  /** Backoff between failed starts (default 2 s doubling up to 5 min). */
  retryBaseMs?: number;
  retryMaxMs?: number;
}

export interface McpServerReport extends McpServerStatus {
  name: string;
  /** The names the model sees (mcp_<server>_<tool>), after the allow/deny lists. */
  tools: string[];
}

export class McpManager {
  private readonly connections = new Map<string, McpServerConnection>();
  /** Per server: exposed tool name → what it was registered from (to spot changes). */
  private readonly registered = new Map<string, Map<string, string>>();
  private readonly registry: ToolRegistry;
  private readonly log: Logger;
  private readonly maxResultChars: number;
  private stopped = false;

  constructor(private readonly opts: McpManagerOptions) {
    this.registry = opts.registry;
    this.log = opts.log ?? logger("mcp");
    this.maxResultChars = opts.maxResultChars ?? 16_000;
    for (const [name, config] of Object.entries(opts.servers)) {
      this.connections.set(
        name,
        new McpServerConnection({
          name,
          config,
          env: opts.env,
          log: this.log,
          workspace: opts.workspace,
          connectTimeoutMs: opts.connectTimeoutMs,
          retryBaseMs: opts.retryBaseMs,
          retryMaxMs: opts.retryMaxMs,
          onToolsChanged: (tools) => this.sync(name, config, tools),
        }),
      );
    }
  }

  /** Connects every enabled server in the background (never throws, never waits); tools appear as servers come up. */
  startInBackground(): void {
    for (const conn of this.connections.values()) {
      if (conn.due) void conn.connect();
    }
  }

  /** Starts the servers that are not running (and not waiting out a backoff), waiting at most timeoutMs. */
  async ensureReady(timeoutMs: number): Promise<void> {
    const pending = [...this.connections.values()]
      .filter((c) => c.due || c.status().state === "connecting")
      .map((c) => c.connect());
    if (pending.length === 0) return;
    await settleWithin(Promise.all(pending), Math.max(0, timeoutMs));
  }

  status(): McpServerReport[] {
    return [...this.connections.values()].map((conn) => {
      const { tools: _serverTools, ...rest } = conn.status();
      return { name: conn.name, ...rest, tools: [...(this.registered.get(conn.name)?.keys() ?? [])] };
    });
  }

  /** Closes every client and ends every server process; their tools leave the registry. */
  async shutdown(): Promise<void> {
    this.stopped = true;
    await Promise.all([...this.connections.values()].map((conn) => conn.close()));
    for (const tools of this.registered.values()) {
      for (const name of tools.keys()) this.registry.unregister(name);
    }
    this.registered.clear();
  }

  // -------------------------------------------------------------------------

  /** Brings the registry in line with a server's current tool list. */
  private sync(server: string, config: McpServerConfig, tools: McpTool[]): void {
    if (this.stopped) return;
    const want = new Map<string, { tool: McpTool; signature: string }>();
    for (const tool of tools) {
      const exposed = mcpToolName(server, tool.name);
      if (!toolAllowed(tool.name, exposed, config.tools)) continue;
      if (want.has(exposed)) {
        this.log.warn(
          `MCP server "${server}": tool "${tool.name}" has the same name as another once sanitized; skipped`,
        );
        continue;
      }
      want.set(exposed, {
        tool,
        signature: JSON.stringify([
          tool.name,
          tool.description ?? "",
          tool.inputSchema,
          tool.annotations?.readOnlyHint === true,
          config.trusted,
        ]),
      });
    }
    const have = this.registered.get(server) ?? new Map<string, string>();
    this.registered.set(server, have);
    for (const [exposed, signature] of have) {
      if (want.get(exposed)?.signature === signature) continue;
      this.registry.unregister(exposed);
      have.delete(exposed);
    }
    for (const [exposed, { tool, signature }] of want) {
      if (have.has(exposed)) continue;
      if (this.registry.has(exposed)) {
        this.log.warn(
          `MCP server "${server}": a tool named ${exposed} already exists; "${tool.name}" skipped`,
        );
        continue;
      }
      this.registry.register(this.toTool(server, config, exposed, tool));
      have.set(exposed, signature);
    }
  }

  private toTool(server: string, config: McpServerConfig, exposed: string, tool: McpTool): Tool {
    const conn = this.connections.get(server)!;
    const workspace = this.opts.workspace;
    return {
      name: exposed,
      group: server,
      description:
        tool.description?.trim() || tool.title || `The "${tool.name}" tool of the MCP server "${server}".`,
      parameters: inputParameters(tool.inputSchema),
      // The server's own word (MCP annotations): a read-only tool is not asked in a marked turn.
      readOnly: tool.annotations?.readOnlyHint === true,
      // An MCP result is text from outside palaver unless the operator vouches for the server.
      ...(config.trusted ? {} : { untrustedSource: () => `the MCP server "${server}"` }),
      execute: async (args: unknown, ctx: ToolContext): Promise<string> => {
        let result;
        try {
          result = await conn.callTool(tool.name, args as Record<string, unknown>, ctx.signal);
        } catch (err) {
          // A stopped turn is not a tool failure: the registry passes it on to the runner.
          if (ctx.signal.aborted) throw err;
          return describeCallError(err, { tool: exposed, server, timeoutSeconds: config.toolTimeout });
        }
        const saved = workspace
          ? await saveResultMedia(result, {
              workspace,
              folder: chatMediaDir(workspace, ctx),
              prefix: exposed,
              onError: (err) => this.log.warn({ err }, `could not save media returned by ${exposed}`),
            })
          : undefined;
        return formatCallResult(result, { maxChars: this.maxResultChars, saved });
      },
    };
  }
}
