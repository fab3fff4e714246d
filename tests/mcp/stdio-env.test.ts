/**
 * What a stdio MCP server sees of palaver's environment: the allow-list plus
 * its own `env`, not the SDK's wider default (USER, SHELL, LOGNAME) and never
 * palaver's keys. Checked inside the real server process.
 */
import { afterEach, describe, expect, it } from "vitest";
import { ToolRegistry } from "../../src/agent/tools/registry.js";
import { McpManager } from "../../src/mcp/manager.js";
import { stdioServerCommand } from "../fakes/mcp-stdio.js";
import { call, mcpServers } from "./helpers.js";

const SET = {
  OPENAI_API_KEY: "sk-mcp-env-test",
  USER: "mcp-env-test-user",
  SHELL: "/bin/mcp-env-test-shell",
  LOGNAME: "mcp-env-test-logname",
  LC_TIME: "C",
};
const saved: Record<string, string | undefined> = {};
let manager: McpManager | undefined;

afterEach(async () => {
  await manager?.shutdown();
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

describe("MCP stdio server environment", () => {
  it("is the allow-list plus the server's env", async () => {
    for (const [name, value] of Object.entries(SET)) {
      saved[name] = process.env[name];
      process.env[name] = value;
    }
    const registry = new ToolRegistry();
    manager = new McpManager({
      servers: mcpServers({ s: { ...stdioServerCommand(), env: { LISTED: "yes" } } }),
      registry,
      env: {},
      connectTimeoutMs: 10_000,
    });
    await manager.ensureReady(10_000);
    const seen = async (name: string) => call(registry, "mcp_s_env", { name });
    expect(await seen("LISTED")).toBe("yes");
    expect(await seen("PATH")).toBe(process.env.PATH);
    expect(await seen("LC_TIME")).toBe("C");
    for (const name of ["OPENAI_API_KEY", "USER", "SHELL", "LOGNAME"])
      expect(await seen(name)).toBe("(unset)");
  });
});
