/**
 * The gateway's HTTP endpoints for supervisors and monitoring, on
 * gateway.host:gateway.port (loopback by default):
 *   GET /healthz  the process is up
 *   GET /readyz   every enabled channel connected, the LLM answering and the journal writing
 *                 (503 otherwise), with detail: each component's state and the reason when it is not ready
 *   GET /metrics  Prometheus text format
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { logger, type Logger } from "../log.js";
import type { Metrics } from "./metrics.js";

export interface ChannelHealth {
  name: string;
  state: string;
  lastError?: string;
}

export interface LlmHealth {
  lastSuccessAt?: number;
  lastFailureAt?: number;
  /** Circuit breaker state per model. */
  circuits?: Record<string, string>;
}

export interface Readiness {
  ready: boolean;
  components: Record<string, { ready: boolean } & Record<string, unknown>>;
}

/** Whether the durable state can be written (a full or read-only disk makes it not ready). */
export interface StorageHealth {
  ready: boolean;
  /** Why not, in words: "disk full (ENOSPC)". */
  error?: string;
  since?: string;
}

export interface ReadinessInput {
  channels: ChannelHealth[];
  llm: LlmHealth;
  /** The journal's state, when there is one. */
  journal?: StorageHealth;
  /** True until the gateway has started its channels: not ready yet, whatever else says. */
  starting?: boolean;
}

/**
 * Pure: ready when the gateway has started, every channel is running, the
 * LLM's last call did not fail (or none was made yet) and the journal (when
 * given) is writing.
 */
export function evaluateReadiness({ channels, llm, journal, starting }: ReadinessInput): Readiness {
  const components: Readiness["components"] = {};
  if (starting) components.gateway = { ready: false, state: "starting" };
  for (const channel of channels) {
    components[`channel:${channel.name}`] = {
      ready: channel.state === "running",
      state: channel.state,
      ...(channel.lastError ? { error: channel.lastError } : {}),
    };
  }
  const lastFailed = (llm.lastFailureAt ?? 0) > (llm.lastSuccessAt ?? 0);
  const allOpen = llm.circuits !== undefined && Object.values(llm.circuits).every((s) => s === "open");
  components.llm = {
    ready: !lastFailed && !allOpen,
    lastSuccessAt: llm.lastSuccessAt ? new Date(llm.lastSuccessAt).toISOString() : null,
    lastFailureAt: llm.lastFailureAt ? new Date(llm.lastFailureAt).toISOString() : null,
    ...(llm.circuits ? { circuits: llm.circuits } : {}),
  };
  if (journal) components.journal = { ...journal };
  return { ready: Object.values(components).every((c) => c.ready), components };
}

export interface HealthServerOptions {
  host: string;
  port: number;
  metrics: Metrics;
  readiness: () => Readiness;
  log?: Logger;
}

export class HealthServer {
  private server: Server | null = null;
  private readonly log: Logger;

  constructor(private readonly opts: HealthServerOptions) {
    this.log = opts.log ?? logger("health");
  }

  /** The port actually bound (useful with port 0). */
  get port(): number | undefined {
    return (this.server?.address() as AddressInfo | null)?.port;
  }

  /** Listens; a port in use is logged, not fatal: the assistant matters more than its dashboard. */
  async start(): Promise<void> {
    const server = createServer((req, res) => void this.handle(req, res));
    server.keepAliveTimeout = 5000;
    await new Promise<void>((resolve) => {
      server.once("error", (err) => {
        this.log.error(
          { err, host: this.opts.host, port: this.opts.port },
          "health endpoint could not listen",
        );
        resolve();
      });
      server.listen(this.opts.port, this.opts.host, () => {
        this.server = server;
        this.log.info({ url: `http://${this.opts.host}:${this.port}` }, "health endpoint listening");
        resolve();
      });
    });
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    try {
      if (req.method !== "GET" && req.method !== "HEAD")
        return send(res, 405, "text/plain", "method not allowed\n");
      switch (path) {
        case "/healthz":
          return send(
            res,
            200,
            "application/json",
            `${JSON.stringify({ status: "ok", uptimeSeconds: Math.round(process.uptime()) })}\n`,
          );
        case "/readyz": {
          const readiness = this.opts.readiness();
          return send(
            res,
            readiness.ready ? 200 : 503,
            "application/json",
            `${JSON.stringify(readiness, null, 2)}\n`,
          );
        }
        case "/metrics":
          return send(res, 200, this.opts.metrics.contentType, await this.opts.metrics.text());
        default:
          return send(res, 404, "text/plain", "not found: try /healthz, /readyz or /metrics\n");
      }
    } catch (err) {
      this.log.error({ err, path }, "health endpoint failed");
      send(res, 500, "text/plain", "internal error\n");
    }
  }
}

function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, { "content-type": type, "cache-control": "no-store" });
  res.end(body);
}
