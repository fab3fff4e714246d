/**
 * The fetch our API clients call (the LLM provider, grammy for Telegram, Slack's Web API
 * clients, Discord's REST client): node:http(s) with one keep-alive pool per client, at most
 * `maxSockets` connections (the LLM's: maxConcurrentTurns + maxSubagents + 1, one per call that
 * can be waiting on the model; a platform's: platformConnections) and idle ones closed after 4 s,
 * before a server would (as Node's fetch does).
 *
 * Why not Node's built-in fetch (undici) or grammy's node-fetch: per call they build a Request,
 * validate every header again and wrap the reply's stream in a web stream, and undici clones and
 * tees the request body in case of a redirect; in the throughput bench (100 turns at once) that
 * was the largest single cost of a message. Here a call is one http.request, and the reply a
 * small Response (PooledResponse below) that reads the body only the way the caller asks for it.
 * On Node 20 the built-in fetch's first use also loads undici (~25 ms of a start).
 *
 * Text, byte and Node stream bodies (grammy's uploads) over http(s) take this path; anything else
 * (a FormData: the openai SDK's transcription, Slack's and Discord's file uploads) goes to the
 * built-in fetch. Redirects are not followed: no API here redirects its calls, and the client
 * reports the status like any other. Compressed replies are decoded.
 */
import {
  Agent as HttpAgent,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
} from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { Readable, type Transform } from "node:stream";
import { urlToHttpOptions } from "node:url";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";
import { BoundedMap } from "./bounded-map.js";

/** Idle connections are closed after this long (undici's default keep-alive timeout). */
const IDLE_SOCKET_MS = 4000;

const DECODERS: Record<string, () => Transform> = {
  gzip: createGunzip,
  "x-gzip": createGunzip,
  deflate: createInflate,
  br: createBrotliDecompress,
};

export interface PoolOptions {
  /** Connections open at most; more calls at once wait for one (Infinity: no limit). */
  maxSockets: number;
  /** Every request goes through this agent (a proxy's tunnel), with its own limits, instead of the pool. */
  agent?: HttpAgent;
}

export function pooledFetch(opts: PoolOptions): typeof fetch {
  const pool = { keepAlive: true, maxSockets: opts.maxSockets, timeout: IDLE_SOCKET_MS };
  const http = opts.agent ?? new HttpAgent(pool);
  const https = opts.agent ?? new HttpsAgent(pool);

  return (input, init = {}) => {
    const body = init.body;
    const target = typeof input === "string" || input instanceof URL ? targetOf(input) : undefined;
    const simpleBody =
      body == null || typeof body === "string" || body instanceof Uint8Array || body instanceof Readable;
    if (!target || !simpleBody) return fetch(input, init);
    const headers = headerRecord(init.headers);
    // Encoded once, not measured and then encoded again (an LLM request is ~15 KB).
    const bytes = typeof body === "string" ? Buffer.from(body) : body;
    if (bytes != null && !(bytes instanceof Readable)) headers["content-length"] = String(bytes.byteLength);
    const method = init.method ?? "GET";
    const secure = target.protocol === "https:";
    const send = secure ? httpsRequest : httpRequest;
    const signal = init.signal ?? undefined;
    if (signal?.aborted) return Promise.reject(abortError(signal));
    return new Promise<Response>((resolve, reject) => {
      let reply: Readable | undefined;
      const { protocol, hostname, port, path, auth } = target;
      const options = { protocol, hostname, port, path, auth, method, headers, agent: secure ? https : http };
      const req = send(options, (res) => {
        reply = replyStream(res, method);
        resolve(new PooledResponse(res, reply, target.href) as unknown as Response);
      });
      // As fetch does: an abort fails the call, or the reading of the reply, with an AbortError.
      const onAbort = () => {
        const err = abortError(signal!);
        reply?.destroy(err);
        req.destroy(err);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      req.on("close", () => signal?.removeEventListener("abort", onAbort));
      req.on("error", reject);
      if (bytes instanceof Readable) {
        bytes.on("error", (err) => req.destroy(err));
        bytes.pipe(req);
      } else req.end(bytes ?? undefined);
    });
  };
}

/** Where a request goes, as http.request's options name it. */
interface Target {
  href: string;
  protocol: string;
  hostname: string;
  port: number | undefined;
  path: string;
  auth: string | undefined;
}

/**
 * Where a URL points; undefined for what is not http(s). Parsed once per distinct URL (a client
 * calls a handful: the LLM's one endpoint, a Bot API method each), not for every call as
 * http.request(url) would. Only the fields a request uses, read one by one into its options:
 * spreading urlToHttpOptions' frozen null-prototype object into them took 2 µs a call alone and
 * ~6 µs in the throughput bench's profile, against 0.01 µs for this.
 */
const targets = new BoundedMap<string, Readonly<Target>>(256);

function targetOf(input: string | URL): Readonly<Target> | undefined {
  const key = typeof input === "string" ? input : input.href;
  const known = targets.get(key);
  if (known) return known;
  let url: URL;
  try {
    url = new URL(key);
  } catch {
    return undefined; // not a URL: the built-in fetch reports it as fetch would
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return undefined;
  const { protocol, hostname, port, path, auth } = urlToHttpOptions(url);
  const target: Target = {
    href: url.href,
    protocol: protocol!,
    hostname: hostname!,
    port: port === undefined || port === "" ? undefined : Number(port),
    path: path!,
    auth: auth ?? undefined,
  };
  targets.set(key, target);
  return target;
}

/**
 * The request's headers as http.request takes them, names lower-cased as Headers would. Not through
 * a Headers instance, nor `instanceof Headers`: the global's first use loads undici (see above).
 */
function headerRecord(init: RequestInit["headers"]): Record<string, string> {
  const headers: Record<string, string> = {};
  if (!init) return headers;
  if (Array.isArray(init)) for (const [name, value] of init) headers[name!.toLowerCase()] = value!;
  else if (typeof init.forEach === "function")
    (init as Headers).forEach((value, name) => (headers[name] = value));
  else for (const [name, value] of Object.entries(init)) headers[name.toLowerCase()] = String(value);
  return headers;
}

function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  return reason instanceof Error && reason.name === "AbortError"
    ? reason
    : new DOMException("This operation was aborted", "AbortError");
}

/** The reply's body as it should be read: null when there is none, decoded when compressed. */
function replyStream(res: IncomingMessage, method: string): Readable | undefined {
  if (method === "HEAD" || res.statusCode === 204 || res.statusCode === 304) {
    res.resume();
    return undefined;
  }
  const decoder = DECODERS[(res.headers["content-encoding"] ?? "").trim().toLowerCase()];
  if (!decoder) return res;
  const decoded = decoder();
  res.on("error", (err) => decoded.destroy(err));
  return res.pipe(decoded);
}

/**
 * A reply as fetch's Response, for what our clients use of one: status, headers, the body read
 * whole (text(), json(), arrayBuffer()) or as a web stream (the openai SDK's server-sent events).
 * undici's Response around a Node stream cost ~0.3 ms per call (web stream adapters, its body
 * mixin). A reply that is not an event stream is read at once, as undici reads ahead, so its
 * connection goes back to the pool even if nobody reads it. As with fetch, a body is read once.
 */
class PooledResponse {
  readonly ok: boolean;
  readonly status: number;
  readonly statusText: string;
  readonly redirected = false;
  readonly type = "basic";
  private headerList: ReplyHeaders | undefined;
  private webBody: ReadableStream<Uint8Array> | undefined;
  private used = false;
  /** The whole body, being read (undefined: none, or an event stream read as it comes). */
  private readonly whole: Promise<Buffer> | undefined;

  constructor(
    private readonly res: IncomingMessage,
    private readonly stream: Readable | undefined,
    readonly url: string,
  ) {
    this.status = res.statusCode ?? 502;
    this.ok = this.status >= 200 && this.status < 300;
    this.statusText = res.statusMessage ?? "";
    const eventStream = /^text\/event-stream\b/i.test(res.headers["content-type"] ?? "");
    if (stream && !eventStream) {
      this.whole = readWhole(stream);
      this.whole.catch(() => undefined); // reported to whoever reads it
    }
  }

  get headers(): Headers {
    // The caller reads a decoded body: its length and encoding no longer describe it.
    const decoded = this.stream !== undefined && this.stream !== this.res;
    this.headerList ??= new ReplyHeaders(this.res.headers, decoded ? DECODED_AWAY : []);
    return this.headerList as unknown as Headers;
  }

  get body(): ReadableStream<Uint8Array> | null {
    const { stream, whole } = this;
    if (!stream) return null;
    this.webBody ??= this.take(() =>
      whole ? webStreamOf(whole) : (Readable.toWeb(stream) as ReadableStream<Uint8Array>),
    );
    return this.webBody;
  }

  get bodyUsed(): boolean {
    return this.used;
  }

  async text(): Promise<string> {
    return (await this.bytes()).toString("utf8");
  }

  async json(): Promise<unknown> {
    return JSON.parse(await this.text());
  }

  async arrayBuffer(): Promise<ArrayBuffer> {
    const bytes = await this.bytes();
    return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  }

  private bytes(): Promise<Buffer> {
    const { stream, whole } = this;
    return this.take(() => whole ?? (stream ? readWhole(stream) : Promise.resolve(Buffer.alloc(0))));
  }

  private take<T>(read: () => T): T {
    if (this.used) throw new TypeError("Body is unusable: Body has already been read");
    this.used = true;
    return read();
  }
}

const DECODED_AWAY = ["content-encoding", "content-length"];

/**
 * A reply's headers as a reader of fetch's Headers uses them: get and has by any case of the name,
 * forEach, entries, keys, values; repeated headers joined with ", " (set-cookie too). Not a Headers
 * instance (undici, see above): Slack's and Discord's clients read the headers of every reply,
 * starting with their first call at start.
 */
class ReplyHeaders implements Iterable<[string, string]> {
  private readonly byName = new Map<string, string>();

  constructor(incoming: IncomingHttpHeaders, omit: readonly string[]) {
    for (const [name, value] of Object.entries(incoming)) {
      if (value === undefined || omit.includes(name)) continue;
      this.byName.set(name, Array.isArray(value) ? value.join(", ") : value);
    }
  }

  get(name: string): string | null {
    return this.byName.get(name.toLowerCase()) ?? null;
  }

  has(name: string): boolean {
    return this.byName.has(name.toLowerCase());
  }

  forEach(callback: (value: string, name: string, headers: ReplyHeaders) => void): void {
    for (const [name, value] of this.byName) callback(value, name, this);
  }

  entries(): IterableIterator<[string, string]> {
    return this.byName.entries();
  }

  keys(): IterableIterator<string> {
    return this.byName.keys();
  }

  values(): IterableIterator<string> {
    return this.byName.values();
  }

  [Symbol.iterator](): IterableIterator<[string, string]> {
    return this.byName.entries();
  }
}

/** The whole stream (not node:stream/consumers' buffer(), whose async iteration costs ~10× as much). */
function readWhole(stream: Readable): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.once("end", () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
    stream.once("error", reject);
    // Destroyed without an error (its socket closed under it): fail rather than wait forever. (Only
    // then is the Error made: capturing its stack on every reply's close cost ~0.1 ms a call.)
    stream.once("close", () => {
      if (!stream.readableEnded) reject(new Error("the connection closed before the reply was complete"));
    });
  });
}

function webStreamOf(whole: Promise<Buffer>): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    async start(controller) {
      try {
        const bytes = await whole;
        if (bytes.length > 0) controller.enqueue(new Uint8Array(bytes));
        controller.close();
      } catch (err) {
        controller.error(err);
      }
    },
  });
}
