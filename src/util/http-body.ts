/**
 * Reading a request's body within bounds, for palaver's own HTTP servers (the web chat, the
 * Slack and Telegram webhooks): a body larger than allowed or slower than allowed is refused
 * with the status to answer, never buffered without limit.
 */
import type { IncomingMessage } from "node:http";

/** A request refused with a status and a message for the caller. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = "HttpError";
  }
}

/** The body, refused past `maxBytes` (413) or when it takes longer than `timeoutMs` (408). */
export function readBody(req: IncomingMessage, maxBytes: number, timeoutMs: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"] ?? NaN);
  if (Number.isFinite(declared) && declared > maxBytes) return Promise.reject(tooLarge(maxBytes));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const finish = (err?: Error) => {
      clearTimeout(timer);
      req.off("data", onData).off("end", onEnd).off("error", finish);
      if (err) {
        // The rest of the body is not wanted: the server answers and closes the connection.
        req.pause();
        reject(err);
      } else resolve(Buffer.concat(chunks));
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > maxBytes) finish(tooLarge(maxBytes));
      else chunks.push(chunk);
    };
    const onEnd = () => finish();
    const timer = setTimeout(() => finish(new HttpError(408, "the request body took too long")), timeoutMs);
    req.on("data", onData).on("end", onEnd).on("error", finish);
  });
}

export function tooLarge(maxBytes: number): HttpError {
  return new HttpError(413, `the request body is larger than ${maxBytes} bytes`);
}
