/**
 * A real MCP server over HTTP on 127.0.0.1 (port 0), built with the SDK's
 * server transports and the fake tools of mcp-tools.ts.
 *
 *   const srv = await FakeMcpHttpServer.start({ mode: "streamable-http" }); // url: http://127.0.0.1:N/mcp
 *   const sse = await FakeMcpHttpServer.start({ mode: "sse" });             // url: http://127.0.0.1:N/sse
 *   srv.requests   // method, path and headers of every HTTP request
 *   srv.state      // cancellations etc., shared by all sessions
 *   await srv.close();
 *
 * The SSE server answers 405 to a POST on /sse, as an old SSE-only server
 * does, so a client that tries Streamable HTTP first has to fall back.
 * `requireHeaders` answers 401 to requests without those header values.
 */
import { randomUUID } from "node:crypto";
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import { SSEServerTransport } from "@modelcontextprotocol/sdk/server/sse.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { createFakeMcpServer, newFakeMcpState, type FakeMcpState } from "./mcp-tools.js";

export interface FakeMcpHttpOptions {
  mode: "streamable-http" | "sse";
  requireHeaders?: Record<string, string>;
}

export interface FakeHttpRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
}

export class FakeMcpHttpServer {
  readonly state: FakeMcpState = newFakeMcpState();
  readonly requests: FakeHttpRequest[] = [];
  private readonly streamable = new Map<string, StreamableHTTPServerTransport>();
  private readonly sse = new Map<string, SSEServerTransport>();
  private http!: Server;
  url = "";

  private constructor(private readonly opts: FakeMcpHttpOptions) {}

  static async start(opts: FakeMcpHttpOptions): Promise<FakeMcpHttpServer> {
    const srv = new FakeMcpHttpServer(opts);
    srv.http = createServer((req, res) => {
      srv.handle(req, res).catch((err: unknown) => {
        if (!res.headersSent) res.writeHead(500).end(String(err));
      });
    });
    await new Promise<void>((resolve) => srv.http.listen(0, "127.0.0.1", resolve));
    const { port } = srv.http.address() as AddressInfo;
    srv.url = `http://127.0.0.1:${port}${opts.mode === "sse" ? "/sse" : "/mcp"}`;
    return srv;
  }

  async close(): Promise<void> {
    for (const server of [...this.state.servers]) await server.close().catch(() => undefined);
    this.http.closeAllConnections();
    await new Promise<void>((resolve) => this.http.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    this.requests.push({ method: req.method ?? "", path: url.pathname, headers: req.headers });
    for (const [name, value] of Object.entries(this.opts.requireHeaders ?? {})) {
      if (req.headers[name.toLowerCase()] !== value) {
        res.writeHead(401).end("unauthorized");
        return;
      }
    }
    if (this.opts.mode === "sse") return this.handleSse(req, res, url);
    return this.handleStreamable(req, res, url);
  }

  private async handleStreamable(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    if (url.pathname !== "/mcp") {
      res.writeHead(404).end();
      return;
    }
    const sessionId = req.headers["mcp-session-id"];
    const body = req.method === "POST" ? await readJson(req) : undefined;
    let transport = typeof sessionId === "string" ? this.streamable.get(sessionId) : undefined;
    if (!transport) {
      if (req.method !== "POST" || !isInitializeRequest(body)) {
        res.writeHead(400, { "content-type": "application/json" }).end(
          JSON.stringify({
            jsonrpc: "2.0",
            error: { code: -32000, message: "no valid session" },
            id: null,
          }),
        );
        return;
      }
      const created = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          this.streamable.set(id, created);
        },
      });
      created.onclose = () => {
        if (created.sessionId) this.streamable.delete(created.sessionId);
      };
      await createFakeMcpServer(this.state, "fake-http").connect(created);
      transport = created;
    }
    await transport.handleRequest(req, res, body);
  }

  private async handleSse(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    if (url.pathname === "/sse" && req.method === "GET") {
      const transport = new SSEServerTransport("/messages", res);
      this.sse.set(transport.sessionId, transport);
      transport.onclose = () => this.sse.delete(transport.sessionId);
      await createFakeMcpServer(this.state, "fake-sse").connect(transport);
      return;
    }
    if (url.pathname === "/messages" && req.method === "POST") {
      const transport = this.sse.get(url.searchParams.get("sessionId") ?? "");
      if (!transport) {
        res.writeHead(404).end("no such session");
        return;
      }
      await transport.handlePostMessage(req, res);
      return;
    }
    res.writeHead(405, { allow: "GET" }).end("method not allowed");
  }
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  return text ? (JSON.parse(text) as unknown) : undefined;
}
