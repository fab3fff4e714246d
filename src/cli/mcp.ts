/** `palaver mcp list`: starts each configured MCP server, shows its state and tools, stops them again. */
import type { Command } from "commander";
import { ToolRegistry } from "../agent/tools/registry.js";
import type { McpServerReport } from "../mcp/manager.js";
import { addCommonOptions, loadForCli } from "./common.js";

interface ListOptions {
  json?: boolean;
  timeout?: string;
}

export function registerMcpCommand(program: Command): void {
  const mcp = program.command("mcp").description("MCP servers (tools.mcpServers)");

  const list = mcp
    .command("list")
    .description("connect to each MCP server and list its status and tools (exit 1 if one is not connected)")
    .option("--json", "print JSON")
    .option("--timeout <seconds>", "how long to wait for the servers to start", "30")
    .action(async (opts: ListOptions, cmd: Command) => {
      const loaded = loadForCli(cmd, { level: "warn" });
      const servers = loaded.config.tools.mcpServers;
      const timeoutSeconds = Number(opts.timeout);
      const waitMs = Number.isFinite(timeoutSeconds) && timeoutSeconds > 0 ? timeoutSeconds * 1000 : 30_000;
      const registry = new ToolRegistry();
      // Imported here: main.ts registers every command, and the others never need the MCP SDK.
      const { McpManager } = await import("../mcp/manager.js");
      const manager = new McpManager({
        servers,
        registry,
        workspace: loaded.workspace,
        connectTimeoutMs: waitMs,
      });
      let reports: McpServerReport[];
      let described: Map<string, string>;
      try {
        manager.startInBackground();
        await manager.ensureReady(waitMs);
        reports = manager.status();
        described = new Map(registry.definitions().map((d) => [d.function.name, d.function.description]));
      } finally {
        await manager.shutdown();
      }
      if (opts.json) {
        const out = reports.map((r) => ({
          ...r,
          tools: r.tools.map((name) => ({ name, description: described.get(name) ?? "" })),
        }));
        process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
      } else {
        process.stdout.write(formatReports(reports, described, loaded.path));
      }
      if (reports.some((r) => r.state !== "connected" && r.state !== "disabled")) process.exitCode = 1;
    });
  addCommonOptions(list);
}

/** Human-readable listing, one block per server. */
export function formatReports(
  reports: McpServerReport[],
  descriptions: ReadonlyMap<string, string>,
  configPath: string,
): string {
  if (reports.length === 0) return `No MCP servers configured (tools.mcpServers in ${configPath}).\n`;
  const lines: string[] = [];
  for (const r of reports) {
    const details = [r.transport, r.pid !== undefined ? `pid ${r.pid}` : undefined]
      .filter(Boolean)
      .join(", ");
    let head = `${r.name}: ${r.state}${details ? ` (${details})` : ""}`;
    if (r.state === "connected") head += `, ${r.tools.length} tool${r.tools.length === 1 ? "" : "s"}`;
    lines.push(head);
    if (r.error) lines.push(`  error: ${r.error}`);
    for (const name of r.tools) {
      const about = firstLine(descriptions.get(name) ?? "");
      lines.push(`  ${name}${about ? `  ${about}` : ""}`);
    }
  }
  return `${lines.join("\n")}\n`;
}

function firstLine(text: string): string {
  const line = text.split("\n")[0]?.trim() ?? "";
  return line.length > 80 ? `${line.slice(0, 79)}…` : line;
}
