/**
 * HTTP mode: the server Slack's Events API, slash commands and interactivity
 * post to (channels.slack.port and path). Bolt's HTTPReceiver answers them
 * through its request listener: it checks Slack's request signature,
 * answers url_verification and ssl_check, reads the retry headers and
 * acknowledges each delivery before it is handled. What this adds in front of
 * it: the body is read here within bounds of size and time (Bolt's listener
 * takes a request whose body was read already, `rawBody`), so nobody can make
 * the gateway buffer an unbounded body before its signature is checked.
 */
import {
  createServer,
  type IncomingMessage,
  type RequestListener,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import type { BufferedIncomingMessage } from "@slack/bolt";
import type { Logger } from "../../log.js";
import { ChannelError, errorMessage } from "../../util/errors.js";
import { HttpError, readBody } from "../../util/http-body.js";
import { settleWithin } from "../../util/timeout.js";

/** Slack's largest bodies (an interaction carrying a whole message) stay well below this. */
const MAX_BODY_BYTES = 4 * 1024 * 1024;
/** Slack gives up on an answer after 3 s; a body still arriving long after that is not Slack's. */
const BODY_TIMEOUT_MS = 10_000;

export interface SlackHttpServerOptions {
  /** Bolt's HTTPReceiver's requestListener. */
  listener: RequestListener;
  /** The one path Slack posts to (channels.slack.path). */
  path: string;
  port: number;
  /** The interface to listen on; all of them when unset. */
  host?: string;
  log: Logger;
}

export class SlackHttpServer {
  private server: Server | undefined;

  constructor(private readonly opts: SlackHttpServerOptions) {}

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
      if (path === this.opts.path && req.method === "POST") {
        const buffered = req as BufferedIncomingMessage;
        buffered.rawBody = await readBody(req, MAX_BODY_BYTES, BODY_TIMEOUT_MS);
      }
      // Anything else Bolt does not serve: it throws (HTTPReceiverDeferredRequestError), answered 404 below.
      this.opts.listener(req, res);
    } catch (err) {
      if (err instanceof HttpError) {
        this.opts.log.warn(
          { remote: req.socket.remoteAddress, why: err.message },
          "Slack HTTP request refused",
        );
        return refuseBody(req, res, err.status);
      }
      this.opts.log.debug({ method: req.method, url: req.url }, "not a Slack request path");
      answer(res, 404);
    }
  }
}

/**
 * A request refused before its body was read (too large, too slow) is answered at once. The
 * rest of its body is read and dropped, for BODY_TIMEOUT_MS at most: closing the connection with
 * data unread would reset it under the client before it read the answer. A client that was too
 * slow is just cut off.
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

function answer(res: ServerResponse, status: number): void {
  if (res.headersSent) return;
  res.writeHead(status).end();
}
