/**
 * The small HTTP pieces every route of the web chat uses: the security headers every response
 * carries, JSON in and out with size and time limits, and the same-origin check of POSTs.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { z } from "zod";
import { HttpError, readBody } from "../../util/http-body.js";

/** The page loads nothing from elsewhere and runs no inline script; nobody may frame it. */
export const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
  "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy": CSP,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
};

/** Largest JSON body. */
export const JSON_BODY_BYTES = 64 * 1024;
/** How long a client may take to send a JSON body. */
export const BODY_TIMEOUT_MS = 15_000;

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = body === undefined ? "" : JSON.stringify(body);
  res.writeHead(status, {
    ...SECURITY_HEADERS,
    "content-type": "application/json; charset=utf-8",
    "cache-control": "no-store",
  });
  res.end(text);
}

export function sendText(
  res: ServerResponse,
  status: number,
  type: string,
  body: string,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, {
    ...SECURITY_HEADERS,
    "content-type": `${type}; charset=utf-8`,
    "cache-control": "no-store",
    ...headers,
  });
  res.end(body);
}

/** A JSON body checked against `schema` (400 with zod's first complaint otherwise). */
export async function readJson<S extends z.ZodType>(req: IncomingMessage, schema: S): Promise<z.output<S>> {
  const body = await readBody(req, JSON_BODY_BYTES, BODY_TIMEOUT_MS);
  let data: unknown;
  try {
    data = body.length === 0 ? {} : JSON.parse(body.toString("utf8"));
  } catch {
    throw new HttpError(400, "the body is not JSON");
  }
  const parsed = schema.safeParse(data);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? `${issue.path.join(".")}: ` : "";
    throw new HttpError(400, `${where}${issue?.message ?? "invalid request"}`);
  }
  return parsed.data;
}

/**
 * Whether a request comes from a page of this server: its Origin names the host the request was
 * sent to (the scheme is not compared, so a TLS-terminating proxy in front works). A browser
 * always sends Origin on a cross-site POST, so a page elsewhere cannot pass this. The host a proxy
 * forwarded counts only behind a trusted proxy: anyone else can send X-Forwarded-Host too.
 */
export function sameOrigin(req: IncomingMessage, trustProxy: boolean): boolean {
  const origin = req.headers.origin;
  if (!origin) return false;
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    return false;
  }
  const forwarded = trustProxy ? req.headers["x-forwarded-host"] : undefined;
  const targets = [req.headers.host, ...(typeof forwarded === "string" ? forwarded.split(",") : [])];
  return targets.some((t) => t !== undefined && t.trim().toLowerCase() === host.toLowerCase());
}

/**
 * Who sent a request, for the per-client limits: the socket's address, or behind a trusted proxy
 * the address that proxy saw (the last X-Forwarded-For entry: the ones before it are the client's
 * own words).
 */
export function clientAddress(req: IncomingMessage, trustProxy: boolean): string {
  const direct = req.socket.remoteAddress ?? "";
  if (!trustProxy) return direct;
  const forwarded = req.headers["x-forwarded-for"];
  const last = typeof forwarded === "string" ? forwarded.split(",").at(-1)?.trim() : undefined;
  return last || direct;
}

/** A name of this machine's loopback interface: `localhost`, `127.x.x.x`, `::1` (or `[::1]`). */
export function isLoopbackName(hostname: string): boolean {
  return /^(localhost|127(?:\.\d{1,3}){3}|::1|\[::1\])$/i.test(hostname);
}

/** The host name of a Host header, without its port. */
export function hostnameOf(hostHeader: string): string {
  return hostHeader.replace(/:\d+$/, "");
}

/** A browser navigation (the address bar, a link) rather than the page's fetch. */
export function isNavigation(req: IncomingMessage): boolean {
  const mode = req.headers["sec-fetch-mode"];
  if (mode) return mode === "navigate";
  return (req.headers.accept ?? "").includes("text/html");
}

/** Whether the page was reached over TLS (directly, or through a trusted proxy that says so). */
export function isSecure(req: IncomingMessage, trustProxy: boolean): boolean {
  const proto = trustProxy ? req.headers["x-forwarded-proto"] : undefined;
  return (
    (typeof proto === "string" && proto.split(",")[0]?.trim() === "https") ||
    Boolean((req.socket as { encrypted?: boolean }).encrypted)
  );
}
