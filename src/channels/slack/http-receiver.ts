/**
 * HTTP mode: a small node:http server for Slack's Events API, slash commands
 * and interactivity, all posted to one path. A request is answered only when
 * Slack signed it (signature.ts): the signing headers are checked before the
 * body is read, the body is bounded in size and time, its signature checked
 * before it is parsed. A verified delivery is acknowledged at once (Slack
 * resends an event, or shows the user an error, after 3 s without) and then
 * handed on (dispatch.ts says what it is).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "../../log.js";
import { ChannelError, errorMessage } from "../../util/errors.js";
import { settleWithin } from "../../util/timeout.js";
import { HttpError, readBody } from "../../util/http-body.js";
import { fromHttpBody, httpAnswer, type Delivery } from "./dispatch.js";
import { isSslCheck, parseSlackBody, signatureMatches, signedHeaders } from "./signature.js";

/** The limit Bolt had: Slack's largest bodies (an interaction carrying a whole message) stay well below it. */
const MAX_BODY_BYTES = 4 * 1024 * 1024;
/** Slack gives up on an answer after 3 s; a body still arriving long after that is not Slack's. */
const BODY_TIMEOUT_MS = 10_000;

export interface SlackHttpOptions {
  signingSecret: string;
  /** The one path Slack posts to (channels.slack.path). */
  path: string;
  port: number;
  /** The interface to listen on; all of them when unset. */
  host?: string;
  log: Logger;
  /** A verified delivery, its ack already sent. */
  onDelivery(delivery: Delivery): void;
}

export class SlackHttpReceiver {
  private server: Server | undefined;

  constructor(private readonly opts: SlackHttpOptions) {}

  get address(): AddressInfo | undefined {
    const address = this.server?.address();
    return address && typeof address === "object" ? address : undefined;
  }

  async start(): Promise<AddressInfo> {
    const { port, host } = this.opts;
    const server = createServer((req, res) => void this.onRequest(req, res));
    this.server = server;
    try {
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen({ port, ...(host ? { host } : {}) }, () => {
          server.off("error", reject);
          resolve();
        });
      });
    } catch (err) {
      this.server = undefined;
      throw new ChannelError(
        `cannot listen for Slack events on port ${port} (channels.slack.port): ${errorMessage(err)}`,
        { cause: err },
      );
    }
    server.on("error", (err) => this.opts.log.error({ err }, "Slack HTTP server error"));
    return this.address!;
  }

  /** Stops listening; requests under way get `timeoutMs` to finish, then their connections close. */
  async stop(timeoutMs: number): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    await settleWithin(closed, timeoutMs);
    server.closeAllConnections();
  }

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const path = new URL(req.url ?? "/", "http://localhost").pathname;
      if (path !== this.opts.path) return answer(res, 404);
      if (req.method !== "POST") return answer(res, 405);
      const delivery = await this.verified(req, res);
      if (!delivery) return;
      const ack = httpAnswer(delivery);
      answer(res, ack.status, ack.json);
      // Slack sends an event again when an answer was late or lost; taking a message twice is
      // prevented where messages are remembered (receiver.ts), so a retry is handed on like any.
      const retry = req.headers["x-slack-retry-num"];
      if (retry) {
        const reason = req.headers["x-slack-retry-reason"];
        this.opts.log.debug({ retry, reason }, "Slack sent a delivery again");
      }
      this.handOn(delivery);
    } catch (err) {
      if (err instanceof HttpError) {
        this.refused(req, err.message);
        return refuseBody(req, res, err.status);
      }
      this.opts.log.warn({ err }, "Slack HTTP request failed");
      answer(res, 400);
    }
  }

  /** The request's delivery when Slack signed it; otherwise answered here (401, 400) and undefined. */
  private async verified(req: IncomingMessage, res: ServerResponse): Promise<Delivery | undefined> {
    const contentType = req.headers["content-type"];
    const headers = signedHeaders(req.headers, Date.now());
    if (!headers.ok) {
      // Slack's TLS check of a slash command URL may come unsigned; it is answered, nothing in it read.
      if (headers.unsigned && isSslCheck(contentType, await readBody(req, MAX_BODY_BYTES, BODY_TIMEOUT_MS))) {
        return { kind: "sslCheck" };
      }
      this.refused(req, headers.why);
      refuseBody(req, res, 401);
      return undefined;
    }
    const body = await readBody(req, MAX_BODY_BYTES, BODY_TIMEOUT_MS);
    if (!signatureMatches(this.opts.signingSecret, headers.timestamp, headers.signature, body)) {
      this.refused(req, "the signature does not match (check channels.slack.signingSecret)");
      answer(res, 401);
      return undefined;
    }
    try {
      return fromHttpBody(parseSlackBody(contentType, body));
    } catch (err) {
      this.opts.log.warn({ err }, "malformed Slack request body");
      answer(res, 400);
      return undefined;
    }
  }

  private handOn(delivery: Delivery): void {
    try {
      this.opts.onDelivery(delivery);
    } catch (err) {
      this.opts.log.error({ err }, "Slack event handling failed");
    }
  }

  private refused(req: IncomingMessage, why: string): void {
    this.opts.log.warn({ remote: req.socket.remoteAddress, why }, "Slack HTTP request refused");
  }
}

/**
 * A request refused before its body was read (unsigned, too large, too slow) is answered at once.
 * The rest of its body is read and dropped, for BODY_TIMEOUT_MS at most: closing the connection
 * with data unread would reset it under the client before it read the answer. A client that was
 * too slow is just cut off.
 */
function refuseBody(req: IncomingMessage, res: ServerResponse, status: number): void {
  if (status === 408) {
    res.setHeader("connection", "close");
  } else if (!req.complete) {
    const timer = setTimeout(() => req.socket.destroy(), BODY_TIMEOUT_MS);
    const done = () => clearTimeout(timer);
    req.once("end", done).once("close", done).resume();
  }
  answer(res, status);
}

function answer(res: ServerResponse, status: number, json?: unknown): void {
  if (res.headersSent) return;
  if (json === undefined) {
    res.writeHead(status).end();
    return;
  }
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(json));
}
