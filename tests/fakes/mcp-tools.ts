/**
 * The tools of the fake MCP servers (stdio, Streamable HTTP and SSE), built
 * with the official SDK's low-level Server so tests control the raw JSON
 * Schemas, results and notifications exactly.
 *
 *   echo {text}            → "echo: <text>"
 *   add {a, b}             → {"sum": a+b} as text and as structuredContent
 *   slow {ms?}             → waits (default 60 s) unless cancelled; cancellations are recorded
 *   cancellations          → JSON list of the reasons of cancelled requests so far
 *   fail                   → isError result "the thing broke"
 *   throw                  → a JSON-RPC error ("exploded")
 *   env {name}             → the server process's environment variable (or "(unset)")
 *   headers                → JSON of the HTTP request headers the server received
 *   media                  → an image, an embedded text resource, a blob resource and a resource link
 *   big {n}                → n times "x"
 *   pid                    → the server's process id
 *   crash                  → the server process exits (stdio)
 *   toggle                 → removes "fail", adds "added_later", sends tools/list_changed
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  type CallToolResult,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";

/** Shared by every session of one fake server (each HTTP session gets its own Server). */
export interface FakeMcpState {
  /** Names of the tools called, in order (recorded when the call starts). */
  calls: string[];
  cancelled: string[];
  toggled: boolean;
  /** Servers of live sessions, to send list_changed to all of them. */
  servers: Set<Server>;
}

export function newFakeMcpState(): FakeMcpState {
  return { calls: [], cancelled: [], toggled: false, servers: new Set() };
}

/** A 1×1 transparent PNG. */
export const PNG_BASE64 =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

const obj = (properties: Record<string, object> = {}, required: string[] = []): Tool["inputSchema"] => ({
  type: "object",
  properties,
  ...(required.length ? { required } : {}),
});

const BASE_TOOLS: Tool[] = [
  {
    name: "echo",
    description: "Echo the text back.",
    inputSchema: obj({ text: { type: "string", description: "what to echo" } }, ["text"]),
  },
  {
    name: "add",
    description: "Add two numbers.",
    inputSchema: obj({ a: { type: "number" }, b: { type: "number" } }, ["a", "b"]),
  },
  { name: "slow", description: "Take a long time.", inputSchema: obj({ ms: { type: "number" } }) },
  { name: "cancellations", description: "Cancelled requests so far.", inputSchema: obj() },
  { name: "fail", description: "Always fails.", inputSchema: obj() },
  { name: "throw", description: "Throws.", inputSchema: obj() },
  { name: "env", description: "Read an env var.", inputSchema: obj({ name: { type: "string" } }, ["name"]) },
  { name: "headers", description: "Request headers seen.", inputSchema: obj() },
  { name: "media", description: "Binary and resource content.", inputSchema: obj() },
  {
    name: "big",
    description: "A long result.",
    inputSchema: obj({ n: { type: "integer", minimum: 1 } }, ["n"]),
  },
  { name: "pid", description: "The process id.", inputSchema: obj() },
  { name: "crash", description: "Exit the process.", inputSchema: obj() },
  { name: "toggle", description: "Change the tool list.", inputSchema: obj() },
];

const ADDED_LATER: Tool = {
  name: "added_later",
  description: "Appeared after toggle.",
  inputSchema: obj({ x: { type: "string" } }),
};

function toolsOf(state: FakeMcpState): Tool[] {
  return state.toggled ? [...BASE_TOOLS.filter((t) => t.name !== "fail"), ADDED_LATER] : BASE_TOOLS;
}

const text = (t: string): CallToolResult => ({ content: [{ type: "text", text: t }] });

/** A new low-level MCP Server with the fake tools (one per connection/session). */
export function createFakeMcpServer(state: FakeMcpState, name = "fake"): Server {
  const server = new Server({ name, version: "1.0.0" }, { capabilities: { tools: { listChanged: true } } });
  state.servers.add(server);
  server.onclose = () => state.servers.delete(server);

  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: toolsOf(state) }));

  server.setRequestHandler(CallToolRequestSchema, async (req, extra): Promise<CallToolResult> => {
    const args = req.params.arguments ?? {};
    state.calls.push(req.params.name);
    switch (req.params.name) {
      case "echo":
        return text(`echo: ${String(args.text)}`);
      case "add": {
        const sum = Number(args.a) + Number(args.b);
        return { content: [{ type: "text", text: JSON.stringify({ sum }) }], structuredContent: { sum } };
      }
      case "slow": {
        const ms = typeof args.ms === "number" ? args.ms : 60_000;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, ms);
          extra.signal.addEventListener("abort", () => {
            clearTimeout(timer);
            state.cancelled.push(String(extra.signal.reason));
            resolve();
          });
        });
        return text("done");
      }
      case "cancellations":
        return text(JSON.stringify(state.cancelled));
      case "fail":
        return { content: [{ type: "text", text: "the thing broke" }], isError: true };
      case "throw":
        throw new Error("exploded");
      case "env":
        return text(process.env[String(args.name)] ?? "(unset)");
      case "headers":
        return text(JSON.stringify(extra.requestInfo?.headers ?? {}));
      case "media":
        return {
          content: [
            { type: "text", text: "here you go" },
            { type: "image", data: PNG_BASE64, mimeType: "image/png" },
            {
              type: "resource",
              resource: { uri: "file:///notes.txt", mimeType: "text/plain", text: "note body" },
            },
            {
              type: "resource",
              resource: { uri: "file:///data.bin", mimeType: "application/octet-stream", blob: "AAECAw==" },
            },
            {
              type: "resource_link",
              uri: "https://example.invalid/doc",
              name: "doc",
              description: "a document",
            },
          ],
        };
      case "big":
        return text("x".repeat(Number(args.n)));
      case "pid":
        return text(String(process.pid));
      case "crash":
        // Dies in the middle of the call, as a crashing server would.
        process.stderr.write("fake server: crashing on purpose\n");
        process.exit(3);
        break;
      case "toggle": {
        state.toggled = !state.toggled;
        await Promise.all([...state.servers].map((s) => s.sendToolListChanged().catch(() => undefined)));
        return text("toggled");
      }
      case "added_later":
        return text(`added: ${String(args.x)}`);
      default:
        throw new Error(`unknown tool ${req.params.name}`);
    }
  });
  return server;
}
