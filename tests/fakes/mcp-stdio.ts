/** How tests start tests/fakes/mcp-stdio-server.ts as an MCP server config. */
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const TSX = pathToFileURL(join(ROOT, "node_modules", "tsx", "dist", "loader.mjs")).href;
export const STDIO_SERVER_SCRIPT = join(ROOT, "tests", "fakes", "mcp-stdio-server.ts");

/** `command` and `args` of an MCP server config that runs the fake stdio server. */
export function stdioServerCommand(): { command: string; args: string[] } {
  return { command: process.execPath, args: ["--import", TSX, STDIO_SERVER_SCRIPT] };
}
