/**
 * The web chat's parts on their own: the default enabling rule, the start line and the kept token,
 * the page's files (compressed once, cached by hash), and the event hub dropping a tab that
 * cannot keep up.
 */
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { platformProblems } from "../../../src/channels/registry.js";
import { EventHub } from "../../../src/channels/web/events.js";
import { StaticAssets } from "../../../src/channels/web/static.js";
import { ConfigSchema } from "../../../src/config/schema.js";
import { Gateway } from "../../../src/gateway.js";
import { createProvider } from "../../../src/llm/openai-provider.js";
import { ROOT } from "../../helpers/cli.js";
import { captureLog } from "../../helpers/log.js";
import { TestChannel } from "../../helpers/test-channel.js";
import { waitFor } from "../../helpers/wait.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-web-parts-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("channels.web.enabled", () => {
  it("is on when no other platform is enabled, off when one is, and as written when written", () => {
    expect(ConfigSchema.parse({}).channels.web.enabled).toBe(true);
    const withTelegram = { telegram: { enabled: true, token: "1:a" } };
    expect(ConfigSchema.parse({ channels: withTelegram }).channels.web.enabled).toBe(false);
    expect(
      ConfigSchema.parse({ channels: { ...withTelegram, web: { enabled: true } } }).channels.web.enabled,
    ).toBe(true);
    expect(ConfigSchema.parse({ channels: { web: { enabled: false } } }).channels.web.enabled).toBe(false);
    expect(ConfigSchema.parse({}).channels.web.allowFrom).toEqual(["owner"]);
  });

  it("refuses a short configured token, and only when the web chat is enabled", () => {
    const short = ConfigSchema.parse({ channels: { web: { token: "abc" } } });
    expect(platformProblems(short)).toEqual([expect.stringMatching(/^channels\.web\.token is 3 characters/)]);
    const off = ConfigSchema.parse({ channels: { web: { enabled: false, token: "abc" } } });
    expect(platformProblems(off)).toEqual([]);
  });

  it("is not started by a gateway with another platform enabled", async () => {
    const config = ConfigSchema.parse({
      agents: { defaults: { workspace: join(dir, "ws"), provider: "custom", model: "m" } },
      providers: { custom: { apiKey: "k", apiBase: "http://127.0.0.1:9/v1" } },
      channels: { telegram: { enabled: true, allowFrom: ["1"] } },
      gateway: { heartbeat: { enabled: false }, port: 0 },
    });
    const gateway = new Gateway({
      loaded: { config, workspace: join(dir, "ws"), path: join(dir, "config.json") },
      provider: createProvider(config),
      platforms: { telegram: async () => new TestChannel("telegram") },
    });
    await gateway.start();
    try {
      expect(gateway.channels.status().map((c) => c.name)).toEqual(["telegram"]);
    } finally {
      await gateway.stop(100);
    }
  });
});

describe("the start line and the token", () => {
  it("prints one line with the address and a token kept 0600 in <state>/web/token, the same at the next start", async () => {
    const tokens: string[] = [];
    for (let run = 0; run < 2; run++) {
      const { log, lines } = captureLog("info");
      const config = ConfigSchema.parse({
        agents: { defaults: { workspace: join(dir, "ws"), provider: "custom", model: "m" } },
        providers: { custom: { apiKey: "k", apiBase: "http://127.0.0.1:9/v1" } },
        gateway: { heartbeat: { enabled: false }, port: 0 },
      });
      const gateway = new Gateway({
        loaded: { config, workspace: join(dir, "ws"), path: join(dir, "config.json") },
        provider: createProvider(config),
        log,
      });
      await gateway.start();
      try {
        const starts = lines.filter((l) => String(l.msg).startsWith("Chat with palaver at "));
        expect(starts).toHaveLength(1);
        const match = /^Chat with palaver at http:\/\/127\.0\.0\.1:(\d+)\/#token=(\S+)$/.exec(
          String(starts[0]!.msg),
        );
        expect(Number(match?.[1])).toBe(Number(new URL(gateway.health.url!).port));
        tokens.push(match![2]!);
        expect(lines.some((l) => String(l.msg).startsWith("no channels are running"))).toBe(false);
      } finally {
        await gateway.stop(100);
      }
    }
    expect(tokens[1]).toBe(tokens[0]);
    const file = join(dir, "web", "token");
    expect((await readFile(file, "utf8")).trim()).toBe(tokens[0]);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
  });
});

async function serve(handler: Parameters<typeof createServer>[1]): Promise<{ server: Server; base: string }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

function get(url: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }>(
    (resolve, reject) => {
      httpRequest(url, { headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
        );
      })
        .on("error", reject)
        .end();
    },
  );
}

// A .mjs script without type declarations: imported by a computed name, typed here.
const WEB_BUILD_SCRIPT = pathToFileURL(join(ROOT, "scripts", "build-web.mjs")).href;

describe("the page's files", () => {
  it("serves index.html uncached and hashed assets immutable, the build's brotli or gzip copy as the client accepts", async () => {
    const { writeWithCompressed } = (await import(WEB_BUILD_SCRIPT)) as {
      writeWithCompressed: (path: string, contents: string) => Promise<void>;
    };
    const root = join(dir, "dist-web");
    await mkdir(join(root, "assets"), { recursive: true });
    await writeFile(join(root, "index.html"), "<!doctype html><title>palaver</title>");
    const js = `console.log(${JSON.stringify("x".repeat(2000))});\n`;
    await writeWithCompressed(join(root, "assets", "app.1a2b3c.js"), js);
    // Written without its compressed copies (an older build): sent as it is.
    await writeFile(join(root, "assets", "old.4d5e6f.js"), js);
    const assets = new StaticAssets(root);
    const { server, base } = await serve((req, res) => {
      void assets.serve(req, res, req.url ?? "/").then((served) => {
        if (!served) res.writeHead(404).end();
      });
    });
    try {
      const index = await get(`${base}/`);
      expect(index.headers["cache-control"]).toBe("no-cache");
      expect(index.body.toString()).toContain("<title>palaver</title>");

      const br = await get(`${base}/assets/app.1a2b3c.js`, { "accept-encoding": "gzip, deflate, br" });
      expect(br.headers["cache-control"]).toBe("public, max-age=31536000, immutable");
      expect(br.headers["content-encoding"]).toBe("br");
      expect(br.headers["content-type"]).toBe("text/javascript; charset=utf-8");
      expect(br.body.length).toBeLessThan(js.length / 4);
      expect(brotliDecompressSync(br.body).toString()).toBe(js);

      const gz = await get(`${base}/assets/app.1a2b3c.js`, { "accept-encoding": "gzip" });
      expect(gz.headers["content-encoding"]).toBe("gzip");
      expect(gunzipSync(gz.body).toString()).toBe(js);

      const raw = await get(`${base}/assets/app.1a2b3c.js`);
      expect(raw.headers["content-encoding"]).toBeUndefined();
      expect(raw.body.toString()).toBe(js);

      const old = await get(`${base}/assets/old.4d5e6f.js`, { "accept-encoding": "gzip, deflate, br" });
      expect(old.headers["content-encoding"]).toBeUndefined();
      expect(old.body.toString()).toBe(js);
      // The copies are not assets of their own.
      expect((await get(`${base}/assets/app.1a2b3c.js.br`)).status).toBe(404);

      expect((await get(`${base}/assets/..%2Findex.html`)).status).toBe(404);
      expect((await get(`${base}/assets/missing.js`)).status).toBe(404);
    } finally {
      server.close();
    }
  });

  it("says to run `npm run build` when the page is not built", async () => {
    const assets = new StaticAssets(join(dir, "nothing"));
    const { server, base } = await serve((req, res) => void assets.serve(req, res, "/"));
    try {
      const reply = await get(`${base}/`);
      expect(reply.status).toBe(200);
      expect(reply.body.toString()).toContain("npm run build");
    } finally {
      server.close();
    }
  });
});

describe("EventHub", () => {
  it("drops a tab that stops reading, and keeps one that reads", async () => {
    const hub = new EventHub({ maxBufferedBytes: 64 * 1024 });
    const { server, base } = await serve((_req, res) => {
      hub.subscribe("c", res, []);
    });
    try {
      let readerGot = 0;
      const open = (read: boolean) =>
        new Promise<void>((resolve) => {
          httpRequest(`${base}/`, (res) => {
            if (read) res.on("data", (c: Buffer) => (readerGot += c.length));
            else res.pause();
            res.on("error", () => undefined);
            resolve();
          }).end();
        });
      await open(true);
      await open(false);
      await waitFor(() => hub.clients === 2);
      const text = "y".repeat(16 * 1024);
      for (let i = 0; i < 5000 && hub.clients === 2; i++) {
        hub.publish({ type: "progress", conversationId: "c", text });
        // Between events the reading tab reads (same process): only the other one piles them up.
        await new Promise((r) => setImmediate(r));
      }
      expect(hub.clients).toBe(1);
      await waitFor(() => readerGot > 0);
    } finally {
      hub.close();
      server.closeAllConnections();
      server.close();
    }
  });
});
