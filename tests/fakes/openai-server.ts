/**
 * A loopback fake of an OpenAI-compatible chat-completions server, for
 * driving the real `openai` SDK in tests.
 *
 *   const fake = await FakeOpenAI.start();
 *   fake.enqueue({ content: "hi" }, { toolCalls: [toolCall("read_file", { path: "a" })] });
 *   fake.setHandler((req) => ({ content: `echo ${lastUserText(req)}` }));
 *   ... new OpenAI({ baseURL: fake.baseURL, apiKey: "sk-test" }) ...
 *   fake.requests[0].body.messages
 *   await fake.close();
 *
 * Replies come from the queue first, then the handler, else `{ content: "ok" }`.
 * `fake.refuseParams(...)` makes it answer 400 to requests carrying a
 * parameter a model does not support, the way OpenAI does for reasoning models.
 * `requests` records chat-completion requests only (not GET /v1/models).
 * `fake.limitContext({ maxTokens })` makes it refuse prompts over that many
 * tokens (o200k, as tests/fakes/context-limit.ts counts them) with a real
 * provider's 400 body, and report the count as usage.prompt_tokens.
 *
 * POST /embeddings answers deterministic vectors: each word (after `fake.embeddingSynonyms`, so
 * "automobile" can mean "car") adds 1 to one of 256 dimensions chosen by its hash, so texts sharing
 * words are close and synonyms mapped alike are too. `fake.failEmbeddings(500)` makes it fail,
 * `failEmbeddings(null)` heals it; `embeddingInputs` records every text asked for.
 */
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { setMaxListeners } from "node:events";
import { ContextLimit, type ContextLimitOptions } from "./context-limit.js";

export interface FakeToolCall {
  name: string;
  /** A string is sent verbatim (so invalid JSON can be tested); an object is JSON-encoded. */
  arguments: string | Record<string, unknown>;
  id?: string;
}

export interface FakeReply {
  /** Default: "" (null when toolCalls are given). */
  content?: string | null;
  toolCalls?: FakeToolCall[];
  /** Sent as message.reasoning_content (and as reasoning_content deltas when streaming). */
  reasoning?: string;
  /** HTTP status; >= 400 sends an OpenAI-style error body. */
  status?: number;
  /** Error body for status >= 400 (default `{ error: { message, type, code } }`); a string is sent as an HTML page. */
  errorBody?: unknown;
  /** Extra response headers (e.g. { "retry-after": "1" }). */
  headers?: Record<string, string>;
  /** Wait before answering; stops waiting when the client disconnects or the server closes. */
  delayMs?: number;
  /** Default: "tool_calls" with tool calls, else "stop". */
  finishReason?: string;
  /** Destroy the socket instead of answering (a network error for the client). */
  dropConnection?: boolean;
  usage?: FakeUsage;
  /** Send this instead of a built completion: an object as JSON, a string verbatim (status default 200). */
  rawBody?: unknown;
  /** Model name reported back (default: the requested model). */
  model?: string;
  /** Streaming: wait this long before each content piece (a model writing at its own pace). */
  pieceDelayMs?: number;
  /** Streaming: content arrives in pieces of this many characters (default 5). */
  pieceChars?: number;
  /** Streaming: the connection breaks after this many content pieces (a stream cut mid-way). */
  breakAfterPieces?: number;
}

/** Usage as OpenAI reports it, with the cache and reasoning details its newer models send. */
export interface FakeUsage {
  prompt_tokens: number;
  completion_tokens: number;
  prompt_tokens_details?: { cached_tokens: number };
  completion_tokens_details?: { reasoning_tokens: number };
}

/** The request body as the SDK sent it; loosely typed on purpose. */
export interface FakeChatBody {
  model: string;
  messages: FakeMessage[];
  tools?: { type: string; function: { name: string; description?: string; parameters?: unknown } }[];
  tool_choice?: unknown;
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  max_tokens?: number;
  max_completion_tokens?: number;
  temperature?: number;
  reasoning_effort?: string;
  [key: string]: unknown;
}

export interface FakeMessage {
  role: string;
  content?: unknown;
  tool_calls?: { id: string; type: string; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
  name?: string;
  [key: string]: unknown;
}

export interface RecordedRequest {
  body: FakeChatBody;
  headers: IncomingHttpHeaders;
  path: string;
}

/** A parameter some models refuse: requests that carry it get OpenAI's 400 "unsupported_parameter". */
export interface ParamRefusal {
  /** The models that refuse it. */
  model: RegExp;
  /** The parameter as the error names it ("max_tokens", "temperature", "strict" ...). */
  param: string;
  /** The error text (default: OpenAI's wording for an unsupported parameter). */
  message?: string;
  /** Whether a body carries it (default: a top-level key of that name). */
  present?: (body: FakeChatBody) => boolean;
}

/** OpenAI's reasoning models: no max_tokens, no temperature but the default (their real error texts). */
export const OPENAI_REASONING_REFUSALS: ParamRefusal[] = [
  {
    model: /^(o\d|gpt-5)/,
    param: "max_tokens",
    message:
      "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
  },
  {
    model: /^(o\d|gpt-5)/,
    param: "temperature",
    message:
      "Unsupported value: 'temperature' does not support 0.2 with this model. Only the default (1) value is supported.",
  },
];

export type FakeHandler = (req: RecordedRequest, index: number) => FakeReply | Promise<FakeReply>;

/** One tool call for FakeReply.toolCalls: `{ toolCalls: [toolCall("exec", { command: "ls" })] }`. */
export function toolCall(
  name: string,
  args: string | Record<string, unknown> = {},
  id?: string,
): FakeToolCall {
  return id === undefined ? { name, arguments: args } : { name, arguments: args, id };
}

/** The text of the last user message of a request (handy in handlers). */
export function lastUserText(req: RecordedRequest): string {
  const users = req.body.messages.filter((m) => m.role === "user");
  const content = users[users.length - 1]?.content;
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((p: unknown) =>
        p && typeof p === "object" && "text" in p && typeof p.text === "string" ? p.text : "",
      )
      .join("");
  }
  return "";
}

const ERROR_TYPES: Record<number, { type: string; code: string }> = {
  400: { type: "invalid_request_error", code: "bad_request" },
  401: { type: "invalid_request_error", code: "invalid_api_key" },
  403: { type: "invalid_request_error", code: "forbidden" },
  404: { type: "invalid_request_error", code: "model_not_found" },
  429: { type: "requests", code: "rate_limit_exceeded" },
};

function errorBodyFor(status: number): unknown {
  const t = ERROR_TYPES[status] ?? { type: "server_error", code: "server_error" };
  return { error: { message: `fake error ${status}`, type: t.type, code: t.code, param: null } };
}

/** Splits text into a few pieces so the client has to accumulate deltas. */
function pieces(text: string, size = 5): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

/** A text's fake embedding: one dimension per word (by an FNV-1a hash), synonyms first mapped alike. */
function fakeEmbedding(text: string, synonyms: Record<string, string>): number[] {
  const vector = new Array<number>(256).fill(0);
  for (const word of text.toLowerCase().match(/\p{L}+/gu) ?? []) {
    let hash = 0x811c9dc5;
    for (const ch of synonyms[word] ?? word) hash = Math.imul(hash ^ ch.charCodeAt(0), 0x01000193) >>> 0;
    vector[hash % vector.length]! += 1;
  }
  return vector;
}

export class FakeOpenAI {
  readonly requests: RecordedRequest[] = [];
  private readonly queue: FakeReply[] = [];
  private readonly refusals: ParamRefusal[] = [];
  private handler: FakeHandler | undefined;
  private contextLimit: ContextLimit | undefined;
  /** Indexes (in `requests`) of the requests refused as over the context limit. */
  readonly overflows: number[] = [];
  private readonly sockets = new Set<Socket>();
  /** Aborted on close() so pending delays end at once. */
  private readonly closing = new AbortController();
  private seq = 0;
  private closed: Promise<void> | undefined;
  /** Every text POST /embeddings was asked to embed, in order. */
  readonly embeddingInputs: string[] = [];
  private synonyms: Record<string, string> = {};
  private embeddingFailure: number | null = null;

  private readonly server: Server;
  private port = 0;

  private constructor() {
    // Every delayed reply listens on `closing`; many at once is expected, not a leak.
    setMaxListeners(0, this.closing.signal);
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        if (!res.headersSent) {
          res.writeHead(500, { "content-type": "application/json" });
          res.end(JSON.stringify({ error: { message: String(err), type: "fake_failure", code: null } }));
        } else res.destroy();
      });
    });
    this.server.on("connection", (socket) => {
      this.sockets.add(socket);
      socket.on("close", () => this.sockets.delete(socket));
    });
  }

  static async start(opts: { replies?: FakeReply[]; handler?: FakeHandler } = {}): Promise<FakeOpenAI> {
    const fake = new FakeOpenAI();
    await new Promise<void>((resolve, reject) => {
      fake.server.once("error", reject);
      fake.server.listen(0, "127.0.0.1", () => resolve());
    });
    fake.port = (fake.server.address() as AddressInfo).port;
    if (opts.replies) fake.enqueue(...opts.replies);
    if (opts.handler) fake.setHandler(opts.handler);
    return fake;
  }

  /** e.g. http://127.0.0.1:PORT/v1 — what the SDK takes as baseURL. */
  get baseURL(): string {
    return `http://127.0.0.1:${this.port}/v1`;
  }

  /** Scripted replies, consumed in order before the handler is asked. */
  enqueue(...replies: FakeReply[]): void {
    this.queue.push(...replies);
  }

  /** Parameters refused with a 400 before the queue or the handler is asked. */
  refuseParams(...refusals: ParamRefusal[]): void {
    this.refusals.push(...refusals);
  }

  /** Prompts over `maxTokens` get the provider's "context length exceeded" 400 (see context-limit.ts). */
  async limitContext(opts: ContextLimitOptions): Promise<void> {
    this.contextLimit = await ContextLimit.create(opts);
  }

  /** Words embedded as another word ({ automobile: "car" }). */
  embeddingSynonyms(map: Record<string, string>): void {
    this.synonyms = { ...map };
  }

  /** POST /embeddings answers this status (null: answers again). */
  failEmbeddings(status: number | null): void {
    this.embeddingFailure = status;
  }

  /** Used when the queue is empty. */
  setHandler(h: FakeHandler): void {
    this.handler = h;
  }

  get lastRequest(): RecordedRequest | undefined {
    return this.requests[this.requests.length - 1];
  }

  /** Replies still queued. */
  get pending(): number {
    return this.queue.length;
  }

  /** Closes the server and destroys open sockets (a pending delayed reply does not keep it alive). */
  async close(): Promise<void> {
    this.closed ??= new Promise<void>((resolve) => {
      this.closing.abort();
      this.server.close(() => resolve());
      for (const s of this.sockets) s.destroy();
      this.server.closeAllConnections();
    });
    return this.closed;
  }

  private embed(raw: string, res: ServerResponse): void {
    if (this.embeddingFailure !== null) {
      sendJson(res, this.embeddingFailure, errorBodyFor(this.embeddingFailure));
      return;
    }
    const body = JSON.parse(raw) as { model: string; input: string | string[]; encoding_format?: string };
    const inputs = typeof body.input === "string" ? [body.input] : body.input;
    this.embeddingInputs.push(...inputs);
    const data = inputs.map((text, index) => {
      const vector = fakeEmbedding(text, this.synonyms);
      const embedding =
        body.encoding_format === "base64"
          ? Buffer.from(new Float32Array(vector).buffer).toString("base64")
          : vector;
      return { object: "embedding", index, embedding };
    });
    sendJson(res, 200, {
      object: "list",
      data,
      model: body.model,
      usage: { prompt_tokens: inputs.length, total_tokens: inputs.length },
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    const raw = await readBody(req);
    if (req.method === "GET" && path.endsWith("/models")) {
      sendJson(res, 200, {
        object: "list",
        data: [{ id: "fake-model", object: "model", created: 1_700_000_000, owned_by: "fake" }],
      });
      return;
    }
    if (req.method === "POST" && path.endsWith("/embeddings")) {
      this.embed(raw, res);
      return;
    }
    if (req.method !== "POST" || !path.endsWith("/chat/completions")) {
      sendJson(res, 404, {
        error: { message: `no route ${req.method} ${path}`, type: "not_found", code: null },
      });
      return;
    }
    let body: FakeChatBody;
    try {
      body = JSON.parse(raw) as FakeChatBody;
    } catch {
      sendJson(res, 400, errorBodyFor(400));
      return;
    }
    const recorded: RecordedRequest = { body, headers: req.headers, path };
    const index = this.requests.length;
    this.requests.push(recorded);
    const refused = this.refusals.find(
      (r) => r.model.test(body.model) && (r.present ? r.present(body) : body[r.param] !== undefined),
    );
    if (refused) {
      sendJson(res, 400, {
        error: {
          message:
            refused.message ?? `Unsupported parameter: '${refused.param}' is not supported with this model.`,
          type: "invalid_request_error",
          param: refused.param,
          code: "unsupported_parameter",
        },
      });
      return;
    }
    const promptTokens = this.contextLimit?.count(body);
    if (this.contextLimit && promptTokens !== undefined && promptTokens > this.contextLimit.maxTokens) {
      this.overflows.push(index);
      const refusal = this.contextLimit.refusal(promptTokens);
      sendJson(res, refusal.status, refusal.body);
      return;
    }
    const queued =
      this.queue.shift() ?? (this.handler ? await this.handler(recorded, index) : { content: "ok" });
    const reply =
      promptTokens !== undefined && !queued.usage
        ? { ...queued, usage: { prompt_tokens: promptTokens, completion_tokens: 5 } }
        : queued;

    if (reply.delayMs) {
      const gone = await this.wait(reply.delayMs, res);
      if (gone) return;
    }
    if (reply.dropConnection) {
      req.socket.destroy();
      return;
    }
    const headers = reply.headers ?? {};
    const status = reply.status ?? 200;
    if (status >= 400 && typeof reply.errorBody === "string") {
      // What a proxy in front of the API answers with.
      res.writeHead(status, { "content-type": "text/html", ...headers });
      res.end(reply.errorBody);
      return;
    }
    if (status >= 400) {
      sendJson(res, status, reply.errorBody ?? errorBodyFor(status), headers);
      return;
    }
    if (reply.rawBody !== undefined) {
      if (typeof reply.rawBody === "string") {
        res.writeHead(status, { "content-type": "application/json", ...headers });
        res.end(reply.rawBody);
      } else sendJson(res, status, reply.rawBody, headers);
      return;
    }
    const id = `chatcmpl-fake-${++this.seq}`;
    if (body.stream) await this.sendStream(res, id, body, reply, headers);
    else sendJson(res, status, completion(id, body, reply), headers);
  }

  /** Resolves true when the client went away (or the server is closing) before `ms` passed. */
  private wait(ms: number, res: ServerResponse): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const done = (gone: boolean) => {
        clearTimeout(timer);
        res.off("close", onClose);
        this.closing.signal.removeEventListener("abort", onClose);
        resolve(gone);
      };
      const onClose = () => done(true);
      const timer = setTimeout(() => done(false), ms);
      res.on("close", onClose);
      this.closing.signal.addEventListener("abort", onClose, { once: true });
      if (this.closing.signal.aborted || res.destroyed) done(true);
    });
  }

  private async sendStream(
    res: ServerResponse,
    id: string,
    body: FakeChatBody,
    reply: FakeReply,
    headers: Record<string, string>,
  ): Promise<void> {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", ...headers });
    const model = reply.model ?? body.model;
    const created = Math.floor(Date.now() / 1000);
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
      `data: ${JSON.stringify({
        id,
        object: "chat.completion.chunk",
        created,
        model,
        choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }],
      })}\n\n`;
    res.write(chunk({ role: "assistant", content: "" }));
    if (reply.reasoning) for (const p of pieces(reply.reasoning)) res.write(chunk({ reasoning_content: p }));
    const content = contentOf(reply);
    let sent = 0;
    for (const p of content ? pieces(content, reply.pieceChars) : []) {
      if (reply.pieceDelayMs && (await this.wait(reply.pieceDelayMs, res))) return;
      if (sent++ === reply.breakAfterPieces) {
        res.socket?.destroy();
        return;
      }
      // Flushed before the next step, so a break after it cuts the stream exactly here.
      await new Promise<void>((resolve) => res.write(chunk({ content: p }), () => resolve()));
    }
    (reply.toolCalls ?? []).forEach((tc, i) => {
      const args = typeof tc.arguments === "string" ? tc.arguments : JSON.stringify(tc.arguments);
      res.write(
        chunk({
          tool_calls: [
            {
              index: i,
              id: tc.id ?? `call_${this.seq}_${i}`,
              type: "function",
              function: { name: tc.name, arguments: "" },
            },
          ],
        }),
      );
      for (const p of pieces(args, 8))
        res.write(chunk({ tool_calls: [{ index: i, function: { arguments: p } }] }));
    });
    res.write(chunk({}, finishOf(reply)));
    if (body.stream_options?.include_usage) {
      res.write(
        `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model, choices: [], usage: usageOf(reply) })}\n\n`,
      );
    }
    res.end("data: [DONE]\n\n");
  }
}

function contentOf(reply: FakeReply): string | null {
  if (reply.content !== undefined) return reply.content;
  return reply.toolCalls?.length ? null : "";
}

function finishOf(reply: FakeReply): string {
  return reply.finishReason ?? (reply.toolCalls?.length ? "tool_calls" : "stop");
}

function usageOf(reply: FakeReply): FakeUsage & { total_tokens: number } {
  const u = reply.usage ?? { prompt_tokens: 10, completion_tokens: 5 };
  return { ...u, total_tokens: u.prompt_tokens + u.completion_tokens };
}

function completion(id: string, body: FakeChatBody, reply: FakeReply): unknown {
  const message: Record<string, unknown> = { role: "assistant", content: contentOf(reply), refusal: null };
  if (reply.reasoning !== undefined) message.reasoning_content = reply.reasoning;
  if (reply.toolCalls?.length) {
    message.tool_calls = reply.toolCalls.map((tc, i) => ({
      id: tc.id ?? `call_${id.slice(-4)}_${i}`,
      type: "function",
      function: {
        name: tc.name,
        arguments: typeof tc.arguments === "string" ? tc.arguments : JSON.stringify(tc.arguments),
      },
    }));
  }
  return {
    id,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: reply.model ?? body.model,
    choices: [{ index: 0, message, finish_reason: finishOf(reply), logprobs: null }],
    usage: usageOf(reply),
  };
}

function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

/** Reads the whole request body (bounded: a test never sends more than a few MB). */
async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buf = chunk as Buffer;
    size += buf.length;
    if (size > 32 * 1024 * 1024) throw new Error("request body too large for the fake");
    chunks.push(buf);
  }
  return Buffer.concat(chunks).toString("utf8");
}
