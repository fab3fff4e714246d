/**
 * One MCP server: a client connection that starts lazily, retries with backoff
 * when it cannot start, restarts a crashed server on the next call, refreshes
 * its tool list on `notifications/tools/list_changed`, bounds every request
 * with a timeout and, when closed, leaves no child process behind.
 */
import { TimeoutError, untilAborted, withTimeout } from "../util/timeout.js";
import type { Stream } from "node:stream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { DEFAULT_INHERITED_ENV_VARS, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  ToolListChangedNotificationSchema,
  type CallToolResult,
  type Tool as McpTool,
} from "@modelcontextprotocol/sdk/types.js";
import { expandPath } from "../workspace/paths.js";
import type { ToolsConfig } from "../config/schema.js";
import { backoffDelay } from "../util/backoff.js";
import { logger, registerSecrets, type Logger } from "../log.js";
import { childEnv } from "../util/child-env.js";
import { errorMessage, isAbortError, ToolError } from "../util/errors.js";
import { expandEnvRecord } from "../util/expand-env.js";

export type McpServerConfig = ToolsConfig["mcpServers"][string];
export type { McpTool };

/** "idle": configured but not started yet (servers start on first need or at gateway start). */
export type McpServerState = "idle" | "disabled" | "connecting" | "connected" | "failed" | "stopped";
export type McpTransportKind = "stdio" | "streamable-http" | "sse";

export interface McpServerConnectionOptions {
  name: string;
  config: McpServerConfig;
  /** Where `${VAR}` in env and headers is read from (default process.env). */
  env?: NodeJS.ProcessEnv;
  log?: Logger;
  /** A relative `cwd` is taken inside it (default: palaver's working folder). */
  workspace?: string;
  /** Bound on starting the server and on listing its tools (default 30 s). */
  connectTimeoutMs?: number;
  /** Backoff between failed starts (default 2 s doubling up to 5 min). */
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** Called with the server's whole tool list whenever it is (re)loaded. */
  onToolsChanged?: (tools: McpTool[]) => void;
  now?: () => number;
}

export interface McpServerStatus {
  state: McpServerState;
  /** The server's own tool names, as last listed. */
  tools: string[];
  error?: string;
  /** Until the next start attempt; 0 means "on the next call". */
  retryInMs?: number;
  transport?: McpTransportKind;
  /** The stdio server's process id while it runs. */
  pid?: number;
}

const CLIENT_INFO = { name: "palaver", version: "0.1.0" };
const MAX_TOOL_PAGES = 50;
const STDERR_LINES = 5;
const TERMINATE_SESSION_MS = 2_000;
const KILL_WAIT_MS = 1_000;

export class McpServerConnection {
  readonly name: string;
  private readonly config: McpServerConfig;
  private readonly log: Logger;
  private readonly now: () => number;
  private readonly connectTimeoutMs: number;
  private readonly retryBaseMs: number;
  private readonly retryMaxMs: number;
  private readonly childEnv: Record<string, string>;
  private readonly headers: Record<string, string>;
  private readonly cwd: string | undefined;

  private state: McpServerState;
  private client: Client | undefined;
  private transport: AnyTransport | undefined;
  private kind: McpTransportKind | undefined;
  private pid: number | undefined;
  /** Clients being opened (with their transports), so close() can stop a start in progress. */
  private readonly opening = new Map<Client, AnyTransport>();
  private connecting: Promise<void> | undefined;
  /** Bumped by every start and by close(): a late result of an older one is thrown away. */
  private generation = 0;
  /** Consecutive failed starts (backoff of the background retries). */
  private failures = 0;
  /** Unexpected disconnects since the last successful call: the first restarts at once, then backoff. */
  private crashes = 0;
  private nextAttemptAt = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private lastError: string | undefined;
  private tools: McpTool[] = [];
  private refreshing: Promise<void> | undefined;
  private refreshAgain = false;
  private stderrTail: string[] = [];

  constructor(private readonly opts: McpServerConnectionOptions) {
    this.name = opts.name;
    this.config = opts.config;
    this.log = (opts.log ?? logger("mcp")).child({ server: opts.name });
    this.now = opts.now ?? Date.now;
    this.connectTimeoutMs = opts.connectTimeoutMs ?? 30_000;
    this.retryBaseMs = opts.retryBaseMs ?? 2_000;
    this.retryMaxMs = opts.retryMaxMs ?? 300_000;
    const env = opts.env ?? process.env;
    const childEnv = expandEnvRecord(this.config.env, env);
    const headers = expandEnvRecord(this.config.headers, env);
    for (const name of new Set([...childEnv.missing, ...headers.missing])) {
      this.log.warn(
        { variable: name },
        `MCP server "${this.name}": \${${name}} is not set; using an empty value`,
      );
    }
    this.childEnv = childEnv.value;
    this.headers = headers.value;
    // Values filled in from the environment are where secrets live: keep them out of the logs too.
    registerSecrets([
      ...changedValues(this.config.env, this.childEnv),
      ...changedValues(this.config.headers, this.headers),
    ]);
    this.cwd = this.config.cwd ? expandPath(this.config.cwd, opts.workspace ?? process.cwd()) : undefined;
    this.state = this.config.enabled ? "idle" : "disabled";
  }

  get isStdio(): boolean {
    return Boolean(this.config.command?.trim());
  }

  status(): McpServerStatus {
    const out: McpServerStatus = { state: this.state, tools: this.tools.map((t) => t.name) };
    if (this.lastError !== undefined && this.state === "failed") out.error = this.lastError;
    if (this.state === "failed") out.retryInMs = Math.max(0, this.nextAttemptAt - this.now());
    if (this.kind) out.transport = this.kind;
    if (this.pid !== undefined && this.state === "connected") out.pid = this.pid;
    return out;
  }

  /** Starts the server unless it runs, is starting or is shut down. Never rejects. */
  connect(): Promise<void> {
    if (this.state === "connected" || this.state === "stopped" || this.state === "disabled") {
      return Promise.resolve();
    }
    this.connecting ??= this.attempt().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  /** Whether a start may be tried now (not running, not waiting out a backoff). */
  get due(): boolean {
    if (this.state === "idle") return true;
    return this.state === "failed" && this.nextAttemptAt <= this.now();
  }

  /**
   * Calls a tool, starting (or restarting) the server first when needed.
   * `signal` (the turn's /stop) and the server's toolTimeout both cancel the
   * request; the SDK then sends `notifications/cancelled` to the server.
   */
  async callTool(tool: string, args: Record<string, unknown>, signal: AbortSignal): Promise<CallToolResult> {
    const client = await this.ready(signal);
    const result = await client.callTool({ name: tool, arguments: args }, undefined, {
      signal,
      timeout: this.config.toolTimeout * 1000,
    });
    this.crashes = 0;
    if ("content" in result || "structuredContent" in result) return result as CallToolResult;
    // Servers of protocol 2024-10-07 answer with `toolResult` only.
    return { content: [{ type: "text", text: JSON.stringify(result.toolResult ?? null) }] };
  }

  /** Stops for good: cancels retries and a start in progress, closes the client, ends the process. */
  async close(): Promise<void> {
    this.generation++;
    this.state = this.config.enabled ? "stopped" : "disabled";
    this.clearRetry();
    const client = this.client;
    const transport = this.transport;
    const pid = this.pid;
    this.client = undefined;
    this.transport = undefined;
    this.pid = undefined;
    const pending = [...this.opening];
    this.opening.clear();
    await Promise.all(pending.map(([c, t]) => abandon(c, t)));
    if (client) {
      if (transport instanceof StreamableHTTPClientTransport) {
        await withTimeout(transport.terminateSession(), TERMINATE_SESSION_MS, "ending the session").catch(
          (err: unknown) => this.log.debug({ err }, "MCP session not terminated"),
        );
      }
      await closeQuietly(client);
    }
    if (pid !== undefined) await ensureExited(pid);
    await this.refreshing?.catch(() => undefined);
    await this.connecting?.catch(() => undefined);
  }

  // -------------------------------------------------------------------------

  private async ready(signal: AbortSignal): Promise<Client> {
    // Two rounds: look, maybe start once, look again.
    for (let round = 0; round < 2; round++) {
      if (this.client && this.state === "connected") return this.client;
      if (this.state === "stopped" || this.state === "disabled") {
        throw new ToolError(
          `the MCP server "${this.name}" is ${this.state === "stopped" ? "shut down" : "disabled"}`,
        );
      }
      if (!this.connecting && this.state === "failed" && !this.due) throw this.unavailable();
      await untilAborted(this.connect(), signal);
    }
    throw this.unavailable();
  }

  private unavailable(): ToolError {
    const wait = Math.max(0, this.nextAttemptAt - this.now());
    const when =
      wait > 0
        ? `palaver tries again in ${Math.ceil(wait / 1000)} s`
        : "palaver tries again on the next call";
    return new ToolError(
      `the MCP server "${this.name}" is not available (${this.lastError ?? "not started"}); ${when}.`,
    );
  }

  private async attempt(): Promise<void> {
    this.clearRetry();
    const gen = ++this.generation;
    this.state = "connecting";
    try {
      const opened = await this.open();
      if (gen !== this.generation) {
        await abandon(opened.client, opened.transport);
        return;
      }
      let tools: McpTool[];
      try {
        tools = await listAllTools(opened.client, this.connectTimeoutMs);
      } catch (err) {
        await abandon(opened.client, opened.transport);
        throw new ToolError(`listing its tools failed: ${errorMessage(err)}`, { cause: err });
      }
      if (gen !== this.generation) {
        await abandon(opened.client, opened.transport);
        return;
      }
      this.client = opened.client;
      this.transport = opened.transport;
      this.kind = opened.kind;
      this.pid =
        opened.transport instanceof StdioClientTransport ? (opened.transport.pid ?? undefined) : undefined;
      this.state = "connected";
      this.failures = 0;
      this.lastError = undefined;
      this.log.info({ transport: opened.kind, tools: tools.length }, `MCP server "${this.name}" connected`);
      this.setTools(tools);
    } catch (err) {
      if (gen !== this.generation) return;
      this.failures++;
      this.state = "failed";
      const message = this.failureText(err);
      const delay = backoffDelay(this.failures - 1, this.retryBaseMs, this.retryMaxMs);
      this.nextAttemptAt = this.now() + delay;
      const level = this.failures === 1 || message !== this.lastError ? "warn" : "debug";
      this.lastError = message;
      this.log[level](
        { attempt: this.failures, retryInMs: delay },
        `MCP server "${this.name}" failed to start: ${message}; retrying in ${Math.ceil(delay / 1000)} s`,
      );
      this.retryTimer = setTimeout(() => {
        this.retryTimer = undefined;
        void this.connect();
      }, delay);
      this.retryTimer.unref();
    }
  }

  private failureText(err: unknown): string {
    const text = errorMessage(err);
    const stderr = this.stderrTail.join(" | ");
    return stderr && this.isStdio ? `${text} (stderr: ${stderr})` : text;
  }

  private async open(): Promise<{ client: Client; transport: AnyTransport; kind: McpTransportKind }> {
    if (this.isStdio) {
      this.stderrTail = [];
      const transport = new StdioClientTransport({
        command: this.config.command!.trim(),
        args: this.config.args,
        env: stdioEnv(this.childEnv),
        ...(this.cwd ? { cwd: this.cwd } : {}),
        stderr: "pipe",
      });
      this.watchStderr(transport.stderr);
      return { client: await this.handshake(transport), transport, kind: "stdio" };
    }
    const url = new URL(this.config.url!.trim());
    const kinds: McpTransportKind[] = this.config.transport
      ? [this.config.transport]
      : ["streamable-http", "sse"];
    const requestInit = { headers: this.headers };
    let streamableError: string | undefined;
    for (const [i, kind] of kinds.entries()) {
      const transport =
        kind === "sse"
          ? new SSEClientTransport(url, { requestInit })
          : new StreamableHTTPClientTransport(url, { requestInit });
      try {
        return { client: await this.handshake(transport), transport, kind };
      } catch (err) {
        // A server that does not answer at all will not answer over SSE either.
        if (err instanceof TimeoutError || i === kinds.length - 1) {
          if (streamableError === undefined) throw err;
          throw new ToolError(
            `Streamable HTTP failed (${streamableError}), then SSE failed (${errorMessage(err)})`,
            { cause: err },
          );
        }
        streamableError = errorMessage(err);
        this.log.debug({ err }, `MCP server "${this.name}": Streamable HTTP failed, trying SSE`);
      }
    }
    throw new ToolError("no transport to try"); // unreachable: kinds is never empty
  }

  /** Connects a fresh client over `transport` (the initialize handshake), bounded by connectTimeoutMs. */
  private async handshake(transport: AnyTransport): Promise<Client> {
    const client = new Client(CLIENT_INFO, { capabilities: {} });
    client.onerror = (err) => this.log.debug({ err }, "MCP transport error");
    client.onclose = () => this.onClosed(client);
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => this.refreshTools(client));
    this.opening.set(client, transport);
    try {
      await withTimeout(
        client.connect(transport, { timeout: this.connectTimeoutMs }),
        this.connectTimeoutMs,
        "starting the server",
      );
      return client;
    } catch (err) {
      await abandon(client, transport);
      throw err;
    } finally {
      this.opening.delete(client);
    }
  }

  private onClosed(client: Client): void {
    if (client !== this.client) return; // our own close, or a client that never became current
    this.client = undefined;
    this.transport = undefined;
    this.pid = undefined;
    this.state = "failed";
    this.crashes++;
    const delay = this.crashes <= 1 ? 0 : backoffDelay(this.crashes - 2, this.retryBaseMs, this.retryMaxMs);
    this.nextAttemptAt = this.now() + delay;
    const what = this.isStdio ? "the server process exited" : "the server closed the connection";
    const stderr = this.isStdio && this.stderrTail.length ? ` (stderr: ${this.stderrTail.join(" | ")})` : "";
    this.lastError = `${what}${stderr}`;
    // Tools stay registered: the next call restarts the server.
    this.log.warn(
      { crashes: this.crashes, retryInMs: delay },
      `MCP server "${this.name}": ${this.lastError}`,
    );
  }

  private setTools(tools: McpTool[]): void {
    this.tools = tools;
    try {
      this.opts.onToolsChanged?.(tools);
    } catch (err) {
      this.log.error({ err }, `MCP server "${this.name}": registering its tools failed`);
    }
  }

  /** Reloads the tool list; notifications that arrive meanwhile cause one more reload (bounded). */
  private refreshTools(client: Client): void {
    if (this.refreshing) {
      this.refreshAgain = true;
      return;
    }
    this.refreshing = (async () => {
      for (let round = 0; round < 5; round++) {
        this.refreshAgain = false;
        try {
          const tools = await listAllTools(client, this.connectTimeoutMs);
          if (client !== this.client) return;
          this.log.info({ tools: tools.length }, `MCP server "${this.name}" changed its tools`);
          this.setTools(tools);
        } catch (err) {
          if (client === this.client)
            this.log.warn({ err }, `MCP server "${this.name}": reloading its tools failed`);
          return;
        }
        if (!this.refreshAgain) return;
      }
    })().finally(() => {
      this.refreshing = undefined;
    });
  }

  private watchStderr(stream: Stream | null): void {
    if (!stream) return;
    let partial = "";
    stream.on("data", (chunk: Buffer) => {
      const lines = (partial + chunk.toString("utf8")).split(/\r?\n/);
      partial = (lines.pop() ?? "").slice(-2000);
      for (const line of lines) {
        const text = line.trim();
        if (!text) continue;
        this.log.debug({ stderr: text.slice(0, 2000) }, "MCP server stderr");
        this.stderrTail.push(text.slice(0, 300));
        if (this.stderrTail.length > STDERR_LINES) this.stderrTail.shift();
      }
    });
  }

  private clearRetry(): void {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
  }
}

function changedValues(raw: Record<string, string>, expanded: Record<string, string>): string[] {
  return Object.keys(expanded)
    .filter((k) => expanded[k] !== raw[k])
    .map((k) => expanded[k]!);
}

type AnyTransport = StdioClientTransport | StreamableHTTPClientTransport | SSEClientTransport;

async function listAllTools(client: Client, timeoutMs: number): Promise<McpTool[]> {
  if (!client.getServerCapabilities()?.tools) return [];
  const tools: McpTool[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MAX_TOOL_PAGES; page++) {
    const res = await client.listTools(cursor ? { cursor } : undefined, { timeout: timeoutMs });
    tools.push(...res.tools);
    cursor = res.nextCursor;
    if (!cursor) break;
  }
  return tools;
}

async function closeQuietly(client: Client): Promise<void> {
  try {
    await client.close();
  } catch (err) {
    if (!isAbortError(err)) logger("mcp").debug({ err }, "closing an MCP client failed");
  }
}

/**
 * Closes a client whose start did not complete. A stdio server that never
 * finished the handshake gets SIGTERM at once instead of the SDK's polite
 * 2 s wait for it to exit after stdin closes: it is stuck or broken anyway.
 */
async function abandon(client: Client, transport: AnyTransport): Promise<void> {
  const pid = transport instanceof StdioClientTransport ? transport.pid : null;
  if (pid !== null) {
    try {
      process.kill(pid, "SIGTERM");
    } catch {
      // already gone
    }
  }
  await closeQuietly(client);
  if (pid !== null) await ensureExited(pid);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The SDK ends a stdio server with stdin EOF, SIGTERM, then SIGKILL without waiting: make sure it is gone. */
async function ensureExited(pid: number): Promise<void> {
  if (!isAlive(pid)) return;
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    return;
  }
  const deadline = Date.now() + KILL_WAIT_MS;
  while (isAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
}

/**
 * A stdio server's whole environment: palaver's allow-list (PATH, HOME, LANG,
 * LC_*, TZ, TERM) plus the server's own `env`. The SDK spreads its own
 * defaults (USER, SHELL, LOGNAME, ...) under what we pass; naming those as
 * undefined removes them, since Node leaves undefined variables out.
 */
export function stdioEnv(serverEnv: Record<string, string>): Record<string, string> {
  const dropped = Object.fromEntries(DEFAULT_INHERITED_ENV_VARS.map((name) => [name, undefined]));
  return { ...dropped, ...childEnv(process.env, { extra: serverEnv }) } as Record<string, string>;
}
