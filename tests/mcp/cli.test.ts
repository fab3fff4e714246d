/** `palaver mcp list` as a real child process (the build, dist/main.js), HOME and config in a temp folder. */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FakeMcpHttpServer } from "../fakes/mcp-http-server.js";
import { stdioServerCommand } from "../fakes/mcp-stdio.js";
import { isAlive } from "./helpers.js";
import { runCli, type CliResult } from "../helpers/cli.js";

let dir: string;
let configPath: string;
let http: FakeMcpHttpServer | undefined;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-mcp-cli-"));
  await mkdir(join(dir, "home"));
  configPath = join(dir, "config.json");
});
afterEach(async () => {
  await http?.close();
  http = undefined;
  await rm(dir, { recursive: true, force: true });
});

function cli(args: string[]): Promise<CliResult> {
  return runCli(args, {
    cwd: dir,
    env: { HOME: join(dir, "home"), PALAVER_CONFIG: configPath, MCP_TEST_TOKEN: "tok-1" },
  });
}

describe("palaver mcp list", () => {
  it("shows each server's status and tools, and exits 1 when one is down", async () => {
    http = await FakeMcpHttpServer.start({
      mode: "streamable-http",
      requireHeaders: { authorization: "Bearer tok-1" },
    });
    await writeFile(
      configPath,
      JSON.stringify({
        agents: { defaults: { workspace: join(dir, "ws") } },
        tools: {
          mcpServers: {
            local: { ...stdioServerCommand(), tools: { allow: ["echo", "add"] } },
            remote: {
              url: http.url,
              headers: { Authorization: "Bearer ${MCP_TEST_TOKEN}" },
              tools: { allow: ["pid"] },
            },
            broken: { command: join(dir, "missing-program") },
            off: { enabled: false, command: "x" },
          },
        },
      }),
    );
    const run = await cli(["mcp", "list"]);
    expect(run.code).toBe(1);
    const lines = run.stdout.split("\n");
    expect(lines[0]).toMatch(/^local: connected \(stdio, pid \d+\), 2 tools$/);
    expect(lines[1]).toBe("  mcp_local_echo  Echo the text back.");
    expect(lines[2]).toBe("  mcp_local_add  Add two numbers.");
    expect(lines[3]).toBe("remote: connected (streamable-http), 1 tool");
    expect(lines[4]).toBe("  mcp_remote_pid  The process id.");
    expect(lines[5]).toMatch(/^broken: failed$/);
    expect(lines[6]).toContain("error: spawn");
    expect(lines[6]).toContain("ENOENT");
    expect(lines[7]).toBe("off: disabled");
    // The stdio server it started is gone again.
    const pid = Number(/pid (\d+)/.exec(lines[0]!)![1]);
    expect(isAlive(pid)).toBe(false);
  });

  it("prints JSON with --json, and exits 0 when every enabled server is up", async () => {
    await writeFile(
      configPath,
      JSON.stringify({
        tools: { mcpServers: { local: { ...stdioServerCommand(), tools: { allow: ["echo"] } } } },
      }),
    );
    const run = await cli(["mcp", "list", "--json"]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual([
      {
        name: "local",
        state: "connected",
        transport: "stdio",
        pid: expect.any(Number) as unknown,
        tools: [{ name: "mcp_local_echo", description: "Echo the text back." }],
      },
    ]);
  });

  it("says so when no server is configured, and rejects a server with neither command nor url", async () => {
    const none = await cli(["mcp", "list"]);
    expect(none.code).toBe(0);
    expect(none.stdout).toBe(`No MCP servers configured (tools.mcpServers in ${configPath}).\n`);

    await writeFile(
      configPath,
      JSON.stringify({ tools: { mcpServers: { empty: { command: "", url: "" } } } }),
    );
    const bad = await cli(["mcp", "list"]);
    expect(bad.code).toBe(78);
    expect(bad.stderr).toContain(
      'tools.mcpServers.empty: an MCP server needs a "command" (a local stdio server) or a "url" (a remote server)',
    );
  });
});
