/**
 * The fetch the LLM client (the openai SDK) calls: node:http(s) with one keep-alive pool per
 * provider, at most `maxSockets` connections (createProvider: maxConcurrentTurns + maxSubagents + 1,
 * one per call that can be waiting on the model) and idle ones closed after 4 s, before a server
 * would (as Node's fetch does).
 *
 * Why not Node's built-in fetch (undici): per call it builds a Request, a stream for the request
 * body, clones and tees that stream (in case of a redirect) and validates every header again; in
 * the throughput bench (100 turns at once) that was the largest single cost of a message.
 * Here a call is one http.request and a Response around the reply's stream.
 *
 * Only text and byte bodies over http(s) take this path; anything else (an upload's FormData)
 * goes to the built-in fetch. Redirects are not followed: an LLM API does not redirect its POSTs,
 * and the SDK reports the status like any other. Compressed replies are decoded.
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { Readable, type Transform } from "node:stream";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";

/** Idle connections are closed after this long (undici's default keep-alive timeout). */
const IDLE_SOCKET_MS = 4000;

const DECODERS: Record<string, () => Transform> = {
  gzip: createGunzip,
  "x-gzip": createGunzip,
  deflate: createInflate,
  br: createBrotliDecompress,
};

export function pooledFetch(maxSockets: number): typeof fetch {
  const pool = { keepAlive: true, maxSockets, timeout: IDLE_SOCKET_MS };
  const http = new HttpAgent(pool);
  const https = new HttpsAgent(pool);

  return (input, init = {}) => {
    const body = init.body;
    const url = typeof input === "string" ? new URL(input) : input instanceof URL ? input : undefined;
    const simpleBody = body == null || typeof body === "string" || body instanceof Uint8Array;
    if (!url || !(url.protocol === "http:" || url.protocol === "https:") || !simpleBody) {
      return fetch(input, init);
    }
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, name) => (headers[name] = value));
    if (body != null) headers["content-length"] = String(Buffer.byteLength(body));
    const method = init.method ?? "GET";
    const secure = url.protocol === "https:";
    const send = secure ? httpsRequest : httpRequest;
    const signal = init.signal ?? undefined;
    if (signal?.aborted) return Promise.reject(abortError(signal));
    return new Promise<Response>((resolve, reject) => {
      let reply: Readable | undefined;
      const req = send(url, { method, headers, agent: secure ? https : http }, (res) => {
        reply = replyStream(res, method);
        resolve(toResponse(res, reply));
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
      req.end(body ?? undefined);
    });
  };
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

function toResponse(res: IncomingMessage, body: Readable | undefined): Response {
  const headers = new Headers();
  const raw = res.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) headers.append(raw[i]!, raw[i + 1]!);
  if (body && body !== res) {
    // The SDK reads the decoded text; the length and encoding no longer describe it.
    headers.delete("content-encoding");
    headers.delete("content-length");
  }
  return new Response(body ? (Readable.toWeb(body) as ReadableStream<Uint8Array>) : null, {
    status: res.statusCode ?? 502,
    statusText: res.statusMessage ?? "",
    headers,
  });
}
