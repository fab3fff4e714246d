/**
 * Who may use the web chat: the holder of one token. The token is channels.web.token, or a random
 * one made on first start and kept in <state>/web/token (0600); in a cluster the instances agree
 * on that one through the database (pg-token.ts), so a browser signed in on one is on all. The
 * page trades it once for a cookie (HttpOnly, SameSite=Strict) that carries not the token but a
 * MAC of it, so the cookie is worthless elsewhere and a new token signs every browser out.
 * Comparisons are constant-time.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { IncomingMessage } from "node:http";
import { mkdirPrivate, writeFilePrivate } from "../../util/private-fs.js";

export const COOKIE_NAME = "palaver_web";

/** A year: the cookie lasts as long as the token does; signing out is changing the token. */
const COOKIE_MAX_AGE_S = 365 * 24 * 3600;

export function tokenFileOf(stateDir: string): string {
  return join(stateDir, "web", "token");
}

/** Cluster mode: the token all instances use (pg-token.ts). */
export interface SharedToken {
  /** The cluster's token; `candidate` becomes it when the cluster has none yet. */
  agree(candidate: string): Promise<string>;
}

/**
 * The configured token, else the kept one, else a new one written 0600. With `shared`, the
 * cluster's token wins and is kept in the file too (`palaver status` shows the page's address from it).
 */
export async function loadToken(
  configured: string,
  stateDir: string,
  shared?: SharedToken,
): Promise<{ token: string; file?: string }> {
  if (configured.trim() !== "") return { token: configured.trim() };
  const file = tokenFileOf(stateDir);
  const kept = await readFile(file, "utf8").then(
    (text) => text.trim(),
    (err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") return "";
      throw err;
    },
  );
  const candidate = kept !== "" ? kept : randomBytes(24).toString("base64url");
  const token = shared ? await shared.agree(candidate) : candidate;
  if (token !== kept) {
    await mkdirPrivate(join(stateDir, "web"));
    await writeFilePrivate(file, `${token}\n`);
  }
  return { token, file };
}

/** Constant-time string equality (the lengths may differ: both sides are hashed to one size first). */
export function sameSecret(a: string, b: string): boolean {
  const key = "palaver-compare";
  const ha = createHmac("sha256", key).update(a).digest();
  const hb = createHmac("sha256", key).update(b).digest();
  return timingSafeEqual(ha, hb);
}

export class WebAuth {
  private readonly cookieValue: string;

  constructor(private readonly token: string) {
    this.cookieValue = createHmac("sha256", token).update("palaver web cookie v1").digest("base64url");
  }

  /** Whether `candidate` is the token (the login form). */
  isToken(candidate: string): boolean {
    return sameSecret(candidate, this.token);
  }

  /** What the request's Authorization header carries: no Bearer token, the token, or a wrong one. */
  bearerOf(req: IncomingMessage): "none" | "valid" | "wrong" {
    const header = req.headers.authorization;
    if (header === undefined) return "none";
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    return match !== null && this.isToken(match[1]!) ? "valid" : "wrong";
  }

  /** The request carries the session cookie. */
  hasCookie(req: IncomingMessage): boolean {
    const value = cookieOf(req.headers.cookie ?? "", COOKIE_NAME);
    return value !== undefined && sameSecret(value, this.cookieValue);
  }

  allows(req: IncomingMessage): boolean {
    return this.bearerOf(req) === "valid" || this.hasCookie(req);
  }

  /** The Set-Cookie header of a login; `secure` when the page was reached over https. */
  setCookie(secure: boolean): string {
    const flags = ["Path=/", "HttpOnly", "SameSite=Strict", `Max-Age=${COOKIE_MAX_AGE_S}`];
    if (secure) flags.push("Secure");
    return `${COOKIE_NAME}=${this.cookieValue}; ${flags.join("; ")}`;
  }
}

/** One cookie's value from a Cookie header (the first of that name). */
export function cookieOf(header: string, name: string): string | undefined {
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}
