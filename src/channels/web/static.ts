/**
 * The page's files from dist/web/ (built by `npm run build`): `/` is index.html (never cached, so
 * a new build shows at once), `/assets/*` are content-hashed and cached for good. Each file is read
 * once, when first asked for, with the brotli and gzip copies the build wrote beside it
 * (scripts/build-web.mjs: compressing here would keep zlib's buffers in the daemon), and kept in memory: the
 * page is small. A file without them is sent as it is.
 */
import { readFile } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { extname, join } from "node:path";
import { packageRoot } from "../../util/package-root.js";
import { SECURITY_HEADERS, sendText } from "./http.js";

/** Where `npm run build` puts the page: dist/web/ in palaver's package folder (from src/ under tsx and from the bundle alike). */
const defaultWebRoot = () => join(packageRoot(), "dist", "web");

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".woff2": "font/woff2",
  ".json": "application/json; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".webmanifest": "application/manifest+json",
};
/** Text, which the build writes compressed copies of. */
const COMPRESSIBLE = new Set([".html", ".js", ".css", ".svg", ".json", ".map", ".webmanifest"]);
/** An asset's name; its compressed copies (.br, .gz) are sent only as its content-encoding. */
const ASSET_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*(?<!\.br|\.gz)$/;

const NOT_BUILT =
  "The chat page is not built yet.\n\n" +
  "Run `npm run build` in palaver's folder (npm install does it too), then reload this page.\n";

interface Entry {
  type: string;
  raw: Buffer;
  br?: Buffer;
  gzip?: Buffer;
}

export class StaticAssets {
  /** Read files by path; a missing one is not kept, so a build that appears later is found. */
  private readonly cache = new Map<string, Promise<Entry | undefined>>();

  constructor(private readonly root: string = defaultWebRoot()) {}

  /** Serves `/` and `/assets/*`; false for any other path (the caller's 404). */
  async serve(req: IncomingMessage, res: ServerResponse, path: string): Promise<boolean> {
    if (path === "/" || path === "/index.html") {
      const entry = await this.entry("index.html");
      if (!entry) sendText(res, 200, "text/plain", NOT_BUILT);
      else this.send(req, res, entry, "no-cache");
      return true;
    }
    if (!path.startsWith("/assets/")) return false;
    const name = path.slice("/assets/".length);
    if (!ASSET_NAME.test(name) || name.includes("..")) return false;
    const entry = await this.entry(join("assets", name));
    if (!entry) return false;
    this.send(req, res, entry, "public, max-age=31536000, immutable");
    return true;
  }

  private entry(file: string): Promise<Entry | undefined> {
    let pending = this.cache.get(file);
    if (!pending) {
      pending = this.load(file);
      this.cache.set(file, pending);
      void pending.then((e) => {
        if (!e) this.cache.delete(file);
      });
    }
    return pending;
  }

  private async load(file: string): Promise<Entry | undefined> {
    const path = join(this.root, file);
    const raw = await readIfThere(path);
    if (!raw) return undefined;
    const ext = extname(file);
    const type = TYPES[ext] ?? "application/octet-stream";
    if (!COMPRESSIBLE.has(ext)) return { type, raw };
    const [br, gzip] = await Promise.all([readIfThere(`${path}.br`), readIfThere(`${path}.gz`)]);
    return { type, raw, br, gzip };
  }

  private send(req: IncomingMessage, res: ServerResponse, entry: Entry, cacheControl: string): void {
    const accepts = acceptedEncodings(req.headers["accept-encoding"]);
    const [encoding, body] =
      entry.br && accepts.has("br")
        ? ["br", entry.br]
        : entry.gzip && accepts.has("gzip")
          ? ["gzip", entry.gzip]
          : [undefined, entry.raw];
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      "content-type": entry.type,
      "content-length": String(body.length),
      "cache-control": cacheControl,
      vary: "accept-encoding",
      ...(encoding ? { "content-encoding": encoding } : {}),
    });
    res.end(req.method === "HEAD" ? undefined : body);
  }
}

/** The codings an Accept-Encoding header allows (q=0 excluded). */
export function acceptedEncodings(header: string | undefined): Set<string> {
  const out = new Set<string>();
  for (const part of (header ?? "").split(",")) {
    const [name, ...params] = part.trim().toLowerCase().split(";");
    const q = params.map((p) => p.trim()).find((p) => p.startsWith("q="));
    if (name && !(q && Number(q.slice(2)) === 0)) out.add(name);
  }
  return out;
}

function readIfThere(path: string): Promise<Buffer | undefined> {
  return readFile(path).catch(() => undefined);
}
