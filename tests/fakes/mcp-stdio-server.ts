/**
 * A real MCP server over stdio (the fake tools of mcp-tools.ts), run by tests as
 *   process.execPath --import <tsx loader URL> tests/fakes/mcp-stdio-server.ts
 * It writes a line to stderr when it starts, so tests can see stderr handling.
 * FAKE_MCP_FAIL_START=1 makes it exit at once (a server that cannot start), and so
 * does FAKE_MCP_NEEDS_FILE=<path> while that file does not exist.
 * FAKE_MCP_START_DELAY_MS=<ms> makes it answer only after that long (a slow-starting server).
 */
import { existsSync } from "node:fs";
import { setTimeout as delay } from "node:timers/promises";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { createFakeMcpServer, newFakeMcpState } from "./mcp-tools.js";

const needs = process.env.FAKE_MCP_NEEDS_FILE;
if (process.env.FAKE_MCP_FAIL_START === "1" || (needs && !existsSync(needs))) {
  process.stderr.write("fake server: refusing to start\n");
  process.exit(2);
}
const server = createFakeMcpServer(newFakeMcpState(), "fake-stdio");
process.stderr.write(`fake server: started pid ${process.pid}\n`);
await delay(Number(process.env.FAKE_MCP_START_DELAY_MS ?? 0));
await server.connect(new StdioServerTransport());
