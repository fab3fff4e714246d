/** tools.mcpServers: nanobot's entries are accepted as they are; a server needs a command or a url. */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import { ConfigSchema } from "../../src/config/schema.js";
import { ConfigError } from "../../src/util/errors.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-mcp-config-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function load(mcpServers: unknown) {
  const configPath = join(dir, "config.json");
  await writeFile(configPath, JSON.stringify({ tools: { mcp_servers: mcpServers } }));
  return loadConfig({ configPath, env: {}, loadDotenv: false, cwd: dir });
}

describe("tools.mcpServers", () => {
  it("accepts nanobot's entries unchanged (empty command or url, snake_case tool_timeout)", async () => {
    const { config, warnings } = await load({
      fs: {
        command: "npx",
        args: ["-y", "@modelcontextprotocol/server-filesystem", "/data"],
        env: { LOG_LEVEL: "info" },
        url: "",
        headers: {},
        tool_timeout: 60,
      },
      remote: {
        command: "",
        args: [],
        env: {},
        url: "https://mcp.example.invalid/mcp",
        headers: { Authorization: "Bearer ${TOKEN}" },
        toolTimeout: 30,
      },
    });
    expect(warnings).toEqual([]);
    expect(config.tools.mcpServers.fs).toMatchObject({
      command: "npx",
      toolTimeout: 60,
      enabled: true,
      env: { LOG_LEVEL: "info" },
    });
    expect(config.tools.mcpServers.remote).toMatchObject({
      url: "https://mcp.example.invalid/mcp",
      headers: { Authorization: "Bearer ${TOKEN}" },
      toolTimeout: 30,
    });
  });

  it("fills in the defaults: enabled, 30 s toolTimeout, no transport preference, not trusted", () => {
    const server = ConfigSchema.parse({ tools: { mcpServers: { s: { url: "http://127.0.0.1:1/mcp" } } } })
      .tools.mcpServers.s!;
    expect(server).toEqual({
      enabled: true,
      url: "http://127.0.0.1:1/mcp",
      args: [],
      env: {},
      headers: {},
      toolTimeout: 30,
      trusted: false,
    });
  });

  it("rejects an enabled server with neither a command nor a url, by path", async () => {
    const err = await load({
      nothing: { args: ["x"] },
      blank: { command: " ", url: "" },
      off: { enabled: false },
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    const message = 'an MCP server needs a "command" (a local stdio server) or a "url" (a remote server)';
    expect((err as ConfigError).problems.sort()).toEqual([
      `tools.mcpServers.blank: ${message}`,
      `tools.mcpServers.nothing: ${message}`,
    ]);
  });
});
