/**
 * The gateway's HTTP endpoints for supervisors and monitoring, on
 * gateway.host:gateway.port (loopback by default):
 *   GET /healthz  the process is up
 *   GET /readyz   every enabled channel connected, the LLM answering and the journal writing
 *                 (503 otherwise), with detail: each component's state and the reason when it is not ready
 *   GET /metrics  Prometheus text format
 * Every other path goes to the handler mounted with `mount` (the web chat), or is a 404.
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
  /** Cluster mode: whether the cluster's database answers. */
  database?: StorageHealth;
}

/**
 * Pure: ready when the gateway has started, every channel is running, the
 * LLM's last call did not fail (or none was made yet) and the journal (when
 * given) is writing.
 */
export function evaluateReadiness({ channels, llm, journal, starting, database }: ReadinessInput): Readiness {
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
  if (database) components.database = { ...database };
  return { ready: Object.values(components).every((c) => c.ready), components };
}

/** Serves a request the health endpoints do not; it must answer it (or end the response). */
export type HttpHandler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

/** The part of the gateway's HTTP server a channel may use: the paths health does not serve. */
export interface HttpMount {
  /** Sends every path but /healthz, /readyz and /metrics to `handler`; call the result to take it off. */
  mount(handler: HttpHandler): () => void;
  /** The address bound (`http://127.0.0.1:18790`), once listening; undefined when it could not listen. */
  readonly url: string | undefined;
  /** The host it was asked to bind (gateway.host). */
  readonly host: string;
}

const HEALTH_PATHS = new Set(["/healthz", "/readyz", "/metrics"]);

export interface HealthServerOptions {
  host: string;
  port: number;
  metrics: Metrics;
  readiness: () => Readiness;
  log?: Logger;
}

export class HealthServer implements HttpMount {
  private server: Server | null = null;
  private mounted: HttpHandler | null = null;
  private readonly log: Logger;

  constructor(private readonly opts: HealthServerOptions) {
    this.log = opts.log ?? logger("health");
  }

  /** The port actually bound (useful with port 0). */
  get port(): number | undefined {
    return (this.server?.address() as AddressInfo | null)?.port;
  }

  get host(): string {
    return this.opts.host;
  }

  get url(): string | undefined {
    const port = this.port;
    if (port === undefined) return undefined;
    const host = this.opts.host.includes(":") ? `[${this.opts.host}]` : this.opts.host;
    return `http://${host}:${port}`;
  }

  mount(handler: HttpHandler): () => void {
    this.mounted = handler;
    return () => {
      if (this.mounted === handler) this.mounted = null;
    };
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
    if (!HEALTH_PATHS.has(path) && this.mounted) return this.serveMounted(this.mounted, req, res, path);
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

  private async serveMounted(
    handler: HttpHandler,
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
  ): Promise<void> {
    try {
      await handler(req, res);
    } catch (err) {
      this.log.error({ err, path }, "HTTP handler failed");
      if (!res.headersSent) send(res, 500, "text/plain", "internal error\n");
      else res.destroy();
    }
  }
}

function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, { "content-type": type, "cache-control": "no-store" });
  res.end(body);
}
