/**
 * A real Gateway in process with only the web chat (enabled by default: no other platform is),
 * the fake LLM behind it, and an HTTP client that says exactly which headers it sends (Origin,
 * cookies, Bearer), as a browser or another site would.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigSchema } from "../../../src/config/schema.js";
import { Gateway } from "../../../src/gateway.js";
import { createProvider } from "../../../src/llm/openai-provider.js";
import type { WebEvent } from "../../../src/channels/web/protocol.js";
import { FakeOpenAI } from "../../fakes/openai-server.js";
import { waitFor } from "../../helpers/wait.js";

export const TOKEN = "test-token-0123456789abcdef";

export interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  json<T = unknown>(): T;
}

export interface RequestOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** The address to connect from (another client: any 127.x.x.x reaches the loopback server). */
  localAddress?: string;
}

export class WebRig {
  private readonly streams: IncomingMessage[] = [];

  private constructor(
    readonly dir: string,
    readonly fake: FakeOpenAI,
    readonly gateway: Gateway,
    readonly base: string,
  ) {}

  static async start(extra: Record<string, unknown> = {}): Promise<WebRig> {
    const dir = await mkdtemp(join(tmpdir(), "palaver-web-"));
    const fake = await FakeOpenAI.start();
    const config = ConfigSchema.parse({
      agents: { defaults: { workspace: join(dir, "ws"), provider: "custom", model: "fake-model" } },
      gateway: { heartbeat: { enabled: false }, port: 0 },
      tools: { approval: { mode: "off" } },
      ...extra,
      providers: {
        custom: { apiKey: "k", apiBase: fake.baseURL },
        ...(extra.providers as object | undefined),
      },
      channels: { web: { token: TOKEN }, ...(extra.channels as object | undefined) },
    });
    const gateway = new Gateway({
      loaded: { config, workspace: join(dir, "ws"), path: join(dir, "config.json") },
      provider: createProvider(config),
    });
    await gateway.start();
    const base = gateway.health.url;
    if (!base) throw new Error("the gateway's HTTP server did not listen");
    return new WebRig(dir, fake, gateway, base);
  }

  get origin(): string {
    return this.base;
  }

  /** One request, with no header but those given (and Host). */
  request(path: string, opts: RequestOptions = {}): Promise<Reply> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        `${this.base}${path}`,
        {
          method: opts.method ?? "GET",
          headers: opts.headers ?? {},
          ...(opts.localAddress ? { localAddress: opts.localAddress } : {}),
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => {
            const body = Buffer.concat(chunks).toString("utf8");
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers,
              body,
              json: <T>() => JSON.parse(body) as T,
            });
          });
          res.on("error", reject);
        },
      );
      req.on("error", reject);
      req.end(opts.body);
    });
  }

  /** As the page does it: Bearer-less, same origin, JSON. */
  post(
    path: string,
    body: unknown,
    headers: Record<string, string> = {},
    localAddress?: string,
  ): Promise<Reply> {
    return this.request(path, {
      method: "POST",
      headers: { origin: this.origin, "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
      ...(localAddress ? { localAddress } : {}),
    });
  }

  bearer(): Record<string, string> {
    return { authorization: `Bearer ${TOKEN}` };
  }

  /** Signs in as the page does and returns the Cookie header to send. */
  async login(): Promise<Record<string, string>> {
    const reply = await this.post("/api/login", { token: TOKEN });
    if (reply.status !== 204) throw new Error(`login: ${reply.status} ${reply.body}`);
    const cookie = String(reply.headers["set-cookie"]?.[0] ?? "").split(";")[0]!;
    return { cookie };
  }

  /** Opens the event stream of a conversation; its events collect in the returned array. */
  async subscribe(conversationId: string, headers = this.bearer()): Promise<WebEvent[]> {
    const events: WebEvent[] = [];
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = httpRequest(`${this.base}/api/events?conversation=${conversationId}`, { headers }, resolve);
      req.on("error", reject);
      req.end();
    });
    if (res.statusCode !== 200) throw new Error(`events: HTTP ${res.statusCode}`);
    this.streams.push(res);
    let buffer = "";
    res.setEncoding("utf8");
    res.on("data", (text: string) => {
      buffer += text;
      let end: number;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = block.split("\n").find((l) => l.startsWith("data: "));
        if (data) events.push(JSON.parse(data.slice(6)) as WebEvent);
      }
    });
    res.on("error", () => undefined);
    return events;
  }

  async waitForEvent<T extends WebEvent["type"]>(
    events: WebEvent[],
    type: T,
    match: (e: Extract<WebEvent, { type: T }>) => boolean = () => true,
  ): Promise<Extract<WebEvent, { type: T }>> {
    let found: Extract<WebEvent, { type: T }> | undefined;
    await waitFor(
      () => {
        found = events.find((e): e is Extract<WebEvent, { type: T }> => e.type === type && match(e as never));
        return found !== undefined;
      },
      undefined,
      `a ${type} event`,
    );
    return found!;
  }

  async close(): Promise<void> {
    for (const s of this.streams) s.destroy();
    await this.gateway.stop(1000);
    await this.fake.close();
    await rm(this.dir, { recursive: true, force: true });
  }
}
