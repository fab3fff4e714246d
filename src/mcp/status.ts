/** One line per MCP server for /status and logs. Pure. */
import type { McpServerReport } from "./manager.js";

export function mcpStatusLines(reports: readonly McpServerReport[]): string[] {
  return reports.map((r) => {
    const tools = `${r.tools.length} tool${r.tools.length === 1 ? "" : "s"}`;
    switch (r.state) {
      case "connected":
        return `${r.name}: connected, ${tools}`;
      case "failed": {
        const retry =
          r.retryInMs === undefined
            ? ""
            : r.retryInMs === 0
              ? "; restarts on the next call"
              : `; retry in ${Math.ceil(r.retryInMs / 1000)} s`;
        return `${r.name}: failed (${r.error ?? "unknown error"})${retry}`;
      }
      case "idle":
        return `${r.name}: not started yet`;
      case "connecting":
      case "disabled":
      case "stopped":
        return `${r.name}: ${r.state}`;
    }
  });
}
