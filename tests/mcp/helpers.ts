/** Small shared pieces of the MCP tests. */
import { Writable } from "node:stream";
import { pino, type Logger } from "pino";
import type { ToolRegistry } from "../../src/agent/tools/registry.js";
import type { ToolContext } from "../../src/agent/tools/types.js";
import { ConfigSchema } from "../../src/config/schema.js";
import type { McpServerConfig } from "../../src/mcp/manager.js";

/** Server configs as the config loader would produce them (defaults filled in). */
export function mcpServers(raw: Record<string, Record<string, unknown>>): Record<string, McpServerConfig> {
  return ConfigSchema.parse({ tools: { mcpServers: raw } }).tools.mcpServers;
}

export function testContext(
  signal: AbortSignal = new AbortController().signal,
  workspace = "/nonexistent",
): ToolContext {
  return {
    workspace,
    channel: "test",
    chatId: "c1",
    sessionKey: "test:c1",
    signal,
    publish: () => undefined,
    turn: { sentToOriginChat: false },
  };
}

/** Runs one tool call through the registry, as the runner does. */
export function call(
  registry: ToolRegistry,
  name: string,
  args: Record<string, unknown> = {},
  signal?: AbortSignal,
): Promise<string> {
  return registry.execute(
    { id: "call-1", name, arguments: args, rawArguments: JSON.stringify(args) },
    testContext(signal),
  );
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The shared condition wait (its limit only ends a hung test). */
export { waitFor } from "../helpers/wait.js";

/** A pino logger whose lines (parsed) land in `lines`, for asserting on warnings. */
export function captureLogger(): {
  log: Logger;
  lines: { level: number; msg: string; [k: string]: unknown }[];
} {
  const lines: { level: number; msg: string }[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString("utf8").split("\n"))
        if (line.trim()) lines.push(JSON.parse(line) as never);
      done();
    },
  });
  return { log: pino({ level: "debug" }, stream), lines };
}
