/**
 * The web chat's HTTP surface (src/channels/web/protocol.ts is the contract): the page's files in
 * public, everything under /api/ behind the token. Every POST must also come from the page's own
 * origin or carry the token as a Bearer header, so another site cannot make a browser post here.
 */
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import * as z from "zod";
import type { HttpHandler } from "../../daemon/health.js";
import { HttpError } from "../../util/http-body.js";
import type { WebAuth } from "./auth.js";
import type { EventHub } from "./events.js";
import {
  clientAddress,
  hostnameOf,
  isLoopbackName,
  isNavigation,
  isSecure,
  readJson,
  sameOrigin,
  SECURITY_HEADERS,
  sendJson,
  sendText,
} from "./http.js";
import type { LiveState } from "./live.js";
import { UNAUTHORIZED_PAGE } from "./pages.js";
import type {
  ChooseRequest,
  ChooseResult,
  ConversationSummary,
  HistoryMessage,
  LoginRequest,
  Me,
  SendAccepted,
  SendRequest,
  UsageView,
} from "./protocol.js";
import type { ClientLimits } from "./rate.js";
import type { StaticAssets } from "./static.js";
import type { AgentFiles, Uploads } from "./uploads.js";

export const CONVERSATION_ID = /^[a-z0-9]{1,32}$/;

/** What the routes ask of the channel. Each throws an HttpError for the caller's mistakes. */
export interface WebApp {
  me(): Me;
  conversations(): Promise<ConversationSummary[]>;
  createConversation(): ConversationSummary;
  history(conversationId: string): Promise<HistoryMessage[]>;
  sendMessage(conversationId: string, request: SendRequest): Promise<SendAccepted>;
  stopTurn(conversationId: string): void;
  choose(questionId: string, choiceId: string): ChooseResult;
  /** The usage panel: this conversation's LLM calls, and the whole bot's for an owner. */
  usage(conversationId: string): UsageView;
}

export interface RouteDeps {
  app: WebApp;
  auth: WebAuth;
  assets: StaticAssets;
  hub: EventHub;
  live: LiveState;
  uploads: Uploads;
  files: AgentFiles;
  /** Wrong tokens per client, at login and as Bearer headers: once spent, the client's tries are refused. */
  failures: ClientLimits;
  /** Uploads per client. */
  uploadRate: ClientLimits;
  /** Bound to loopback: requests must name a loopback host (no DNS rebinding). */
  loopbackOnly: boolean;
  /** channels.web.trustProxy: X-Forwarded-Host, -Proto and -For are believed. */
  trustProxy: boolean;
}

const LoginSchema = z.object({ token: z.string().max(1024) }) satisfies z.ZodType<LoginRequest>;
const SendSchema = z.object({
  text: z.string(),
  uploads: z.array(z.string().max(64)).max(20).optional(),
});
const ChooseSchema = z.object({ choiceId: z.string().max(64) }) satisfies z.ZodType<ChooseRequest>;

export function createWebHandler(deps: RouteDeps): HttpHandler {
  return async (req, res) => {
    try {
      await route(deps, req, res);
    } catch (err) {
      if (!(err instanceof HttpError)) throw err;
      if (res.headersSent) {
        res.destroy();
        return;
      }
      // A refused body may still be arriving: close the connection rather than read it.
      if (err.status === 413 || err.status === 408) res.setHeader("connection", "close");
      sendJson(res, err.status, { error: err.message });
    }
  };
}

async function route(deps: RouteDeps, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? "/", "http://localhost");
  const path = url.pathname;
  const method = req.method === "HEAD" ? "GET" : (req.method ?? "GET");
  if (deps.loopbackOnly && !isLoopbackName(hostnameOf(req.headers.host ?? ""))) {
    // Another name for this address (DNS rebinding): the page is only served as localhost.
    throw new HttpError(421, "this server answers only to 127.0.0.1 or localhost");
  }
  if (!path.startsWith("/api/")) {
    if (method === "GET" && (await deps.assets.serve(req, res, path))) return;
    sendText(res, 404, "text/plain", "not found\n");
    return;
  }
  const client = clientAddress(req, deps.trustProxy);
  const bearer = deps.auth.bearerOf(req);
  // A client that guessed wrong too often is refused whatever it sends now, the right token included.
  if ((bearer !== "none" || path === "/api/login") && deps.failures.spent(client)) {
    throw new HttpError(429, "too many wrong tokens from this address: wait a minute");
  }
  if (bearer === "wrong") {
    deps.failures.take(client);
    return unauthorized(req, res);
  }
  if (method === "POST" && !sameOrigin(req, deps.trustProxy) && bearer !== "valid") {
    throw new HttpError(403, "cross-origin request refused: post from the chat page or send the token");
  }
  if (path === "/api/login" && method === "POST") return login(deps, client, req, res);
  if (!deps.auth.allows(req)) return unauthorized(req, res);
  const parts = path.split("/").slice(2); // ["conversations", id, "messages"]
  const [what, id, sub] = parts;
  const { app } = deps;
  if (what === "me" && parts.length === 1 && method === "GET") return sendJson(res, 200, app.me());
  if (what === "conversations" && parts.length === 1) {
    if (method === "GET") return sendJson(res, 200, await app.conversations());
    if (method === "POST") return sendJson(res, 201, app.createConversation());
  }
  if (what === "conversations" && id !== undefined && parts.length === 3) {
    const conversation = conversationId(id);
    if (sub === "messages" && method === "GET") return sendJson(res, 200, await app.history(conversation));
    if (sub === "messages" && method === "POST") {
      const body = await readJson(req, SendSchema);
      return sendJson(res, 202, await app.sendMessage(conversation, body));
    }
    if (sub === "stop" && method === "POST") {
      app.stopTurn(conversation);
      return sendJson(res, 202, {});
    }
  }
  if (what === "uploads" && parts.length === 1 && method === "POST") {
    if (!deps.uploadRate.take(client)) {
      throw new HttpError(
        429,
        "too many uploads from this address: wait a minute (channels.web.uploadsPerMinute)",
      );
    }
    const name = url.searchParams.get("name") ?? "file";
    return sendJson(res, 201, await deps.uploads.save(req, name));
  }
  if (what === "files" && id !== undefined && parts.length === 2 && method === "GET") {
    return serveFile(deps, id, req, res);
  }
  if (what === "questions" && id !== undefined && parts.length === 2 && method === "POST") {
    const { choiceId } = await readJson(req, ChooseSchema);
    return sendJson(res, 200, app.choose(id, choiceId));
  }
  if (what === "usage" && parts.length === 1 && method === "GET") {
    return sendJson(res, 200, app.usage(conversationId(url.searchParams.get("conversation") ?? "")));
  }
  if (what === "events" && parts.length === 1 && method === "GET") {
    const conversation = conversationId(url.searchParams.get("conversation") ?? "");
    if (!deps.hub.subscribe(conversation, res, deps.live.replay(conversation))) {
      throw new HttpError(503, "too many open event streams: close some tabs");
    }
    return;
  }
  throw new HttpError(404, `no such API: ${req.method} ${path}`);
}

function conversationId(id: string): string {
  if (!CONVERSATION_ID.test(id)) throw new HttpError(400, "a conversation id is 1 to 32 of [a-z0-9]");
  return id;
}

async function login(
  deps: RouteDeps,
  client: string,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const { token } = await readJson(req, LoginSchema);
  if (!deps.auth.isToken(token)) {
    deps.failures.take(client); // counted: once spent, route() refuses this client's next tries
    throw new HttpError(401, "wrong token");
  }
  res.writeHead(204, {
    ...SECURITY_HEADERS,
    "set-cookie": deps.auth.setCookie(isSecure(req, deps.trustProxy)),
    "cache-control": "no-store",
  });
  res.end();
}

/** 401: JSON for the page's fetches, a page saying where the token is for a browser navigation. */
function unauthorized(req: IncomingMessage, res: ServerResponse): void {
  if (isNavigation(req)) sendText(res, 401, "text/html", UNAUTHORIZED_PAGE);
  else sendJson(res, 401, { error: "the token is missing or wrong: sign in again" });
}

async function serveFile(
  deps: RouteDeps,
  id: string,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const file = deps.files.get(id);
  if (!file) throw new HttpError(404, "no such file (files are forgotten when palaver restarts)");
  const size = await stat(file.path).then(
    (s) => s.size,
    () => undefined,
  );
  if (size === undefined) throw new HttpError(404, "the file is gone");
  res.writeHead(200, {
    ...SECURITY_HEADERS,
    "content-type": "application/octet-stream",
    "content-length": String(size),
    "content-disposition": `attachment; filename*=UTF-8''${encodeURIComponent(file.name)}`,
    "cache-control": "no-store",
  });
  if (req.method === "HEAD") {
    res.end();
    return;
  }
  createReadStream(file.path)
    .on("error", () => res.destroy())
    .pipe(res);
}
