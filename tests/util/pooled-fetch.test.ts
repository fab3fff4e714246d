/**
 * pooledFetch, the fetch of the LLM client and of Telegram's, against a loopback HTTP server:
 * connections kept and bounded, replies (plain, compressed, streamed, empty) as fetch gives them,
 * aborts as fetch reports them. The provider's and the Telegram channel's own tests drive it
 * through the real openai SDK and grammy.
 */
import { once } from "node:events";
import { Agent, createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import { gzipSync } from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import { pooledFetch } from "../../src/util/pooled-fetch.js";
import { waitFor } from "../helpers/wait.js";

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

interface TestServer {
  url: string;
  /** Connections opened so far. */
  connections: number;
  /** Requests being answered right now, and the most there ever were. */
  inFlight: number;
  maxInFlight: number;
  server: Server;
}

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    server.close();
    await once(server, "close");
  }
});

async function serve(handler: Handler): Promise<TestServer> {
  const state = { connections: 0, inFlight: 0, maxInFlight: 0 };
  const server = createServer((req, res) => {
    state.inFlight++;
    state.maxInFlight = Math.max(state.maxInFlight, state.inFlight);
    res.on("close", () => state.inFlight--);
    let body = "";
    req.setEncoding("utf8").on("data", (d: string) => (body += d));
    req.on("end", () => handler(req, res, body));
  });
  server.on("connection", () => state.connections++);
  servers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return Object.assign(state, { url: `http://127.0.0.1:${port}/v1/chat`, server });
}

const json = (res: ServerResponse, value: unknown, status = 200) => {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(value));
};

describe("pooledFetch", () => {
  it("sends method, headers and body, and gives back status, headers and body", async () => {
    const s = await serve((req, res, body) => {
      res.setHeader("x-request-id", "r1");
      json(
        res,
        { method: req.method, auth: req.headers.authorization, length: req.headers["content-length"], body },
        201,
      );
    });
    const res = await pooledFetch({ maxSockets: 4 })(s.url, {
      method: "POST",
      headers: new Headers({ Authorization: "Bearer k", "Content-Type": "application/json" }),
      body: '{"q":"héllo"}',
    });
    expect(res.status).toBe(201);
    expect(res.ok).toBe(true);
    expect(res.headers.get("x-request-id")).toBe("r1");
    expect(res.headers.get("X-Request-ID")).toBe("r1");
    expect(res.headers.has("content-type")).toBe(true);
    expect(res.headers.get("x-absent")).toBeNull();
    expect(Object.fromEntries(res.headers.entries())).toMatchObject({
      "x-request-id": "r1",
      "content-type": "application/json",
    });
    expect(await res.json()).toEqual({
      method: "POST",
      auth: "Bearer k",
      length: "14",
      body: '{"q":"héllo"}',
    });
  });

  it("gives repeated reply headers joined, as fetch's Headers does", async () => {
    const s = await serve((_req, res) => {
      res.setHeader("x-many", ["a", "b"]);
      res.setHeader("set-cookie", ["c=1", "d=2"]);
      res.end("{}");
    });
    const res = await pooledFetch({ maxSockets: 4 })(s.url, {});
    expect(res.headers.get("x-many")).toBe("a, b");
    expect(res.headers.get("set-cookie")).toBe("c=1, d=2");
    const seen: string[] = [];
    res.headers.forEach((value, name) => seen.push(`${name}=${value}`));
    expect(seen).toContain("x-many=a, b");
    expect([...res.headers.keys()]).toContain("x-many");
  });

  it("takes headers as a plain object (grammy's) or as pairs, names in any case", async () => {
    const s = await serve((req, res) =>
      json(res, { type: req.headers["content-type"], extra: req.headers["x-a"] }),
    );
    const f = pooledFetch({ maxSockets: 4 });
    const fromObject = await f(s.url, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-A": "1" },
    });
    expect(await fromObject.json()).toEqual({ type: "application/json", extra: "1" });
    const fromPairs = await f(s.url, { method: "POST", headers: [["X-A", "2"]] });
    expect(await fromPairs.json()).toEqual({ extra: "2" });
  });

  it("sends each call to the path and query of its own URL, given as a string or a URL", async () => {
    const s = await serve((req, res) => json(res, { path: req.url, host: req.headers.host }));
    const f = pooledFetch({ maxSockets: 4 });
    const base = new URL(s.url);
    const paths = ["/bot1/getMe", "/bot1/sendMessage?x=1", "/bot1/getMe", "/v1/chat"];
    for (const path of paths) {
      const res = await f(new URL(path, base).href, { method: "POST" });
      expect(await res.json()).toEqual({ path, host: base.host });
    }
    const fromUrl = await f(new URL("/other?q=%20", base), {});
    expect(await fromUrl.json()).toEqual({ path: "/other?q=%20", host: base.host });
    expect(fromUrl.url).toBe(new URL("/other?q=%20", base).href);
  });

  it("keeps one connection for calls one after another", async () => {
    const s = await serve((_req, res) => json(res, { ok: true }));
    const f = pooledFetch({ maxSockets: 4 });
    for (let i = 0; i < 20; i++) await (await f(s.url, { method: "POST", body: "{}" })).json();
    expect(s.connections).toBe(1);
  });

  it("opens at most maxSockets connections; the other calls wait for one and all are answered", async () => {
    const held: ServerResponse[] = [];
    const s = await serve((_req, res) => held.push(res));
    const f = pooledFetch({ maxSockets: 2 });
    const calls = Array.from({ length: 5 }, (_, i) => f(s.url, { method: "POST", body: `${i}` }));
    await waitFor(() => held.length === 2, 5000, "two requests at the server");
    // Answered one at a time: each answer frees a connection for a waiting call.
    let answered = 0;
    while (answered < 5) {
      await waitFor(() => held.length > 0, 5000, "a request at the server");
      json(held.shift()!, { n: answered++ });
    }
    expect((await Promise.all(calls)).every((r) => r.status === 200)).toBe(true);
    expect(s.maxInFlight).toBe(2);
    expect(s.connections).toBe(2);
  });

  it("sends a Node stream body (an upload) as it comes, chunked", async () => {
    const s = await serve((req, res, body) => json(res, { chunked: req.headers["transfer-encoding"], body }));
    const body = Readable.from(["part one, ", "part two"]);
    const res = await pooledFetch({ maxSockets: 4 })(s.url, {
      method: "POST",
      body,
    });
    expect(await res.json()).toEqual({ chunked: "chunked", body: "part one, part two" });
  });

  it("frees the connection of a reply nobody reads, and reads a body only once", async () => {
    const s = await serve((_req, res) => json(res, { ok: true }));
    const f = pooledFetch({ maxSockets: 1 });
    for (let i = 0; i < 3; i++) await f(s.url, { method: "POST", body: "{}" }); // bodies left unread
    const res = await f(s.url, { method: "POST", body: "{}" });
    expect(await new Response(res.body).json()).toEqual({ ok: true });
    expect(res.bodyUsed).toBe(true);
    await expect(res.text()).rejects.toThrow(TypeError);
    expect(s.connections).toBe(1);
  });

  it("goes through the agent it is given (a proxy's tunnel) instead of its own pool", async () => {
    const s = await serve((_req, res) => json(res, { ok: true }));
    const agent = new Agent({ keepAlive: true });
    let created = 0;
    const createConnection = agent.createConnection.bind(agent);
    agent.createConnection = (...args: Parameters<typeof createConnection>) => {
      created++;
      return createConnection(...args);
    };
    const f = pooledFetch({ maxSockets: 4, agent });
    await (await f(s.url, { method: "POST", body: "{}" })).json();
    await (await f(s.url, { method: "POST", body: "{}" })).json();
    expect(created).toBe(1);
    agent.destroy();
  });

  it("streams a reply as it comes (server-sent events)", async () => {
    let res!: ServerResponse;
    const s = await serve((_req, r) => {
      res = r;
      r.writeHead(200, { "content-type": "text/event-stream" });
      r.write("data: one\n\n");
    });
    const reply = await pooledFetch({ maxSockets: 4 })(s.url, { method: "POST", body: "{}" });
    const reader = reply.body!.getReader();
    const first = await reader.read();
    expect(Buffer.from(first.value ?? []).toString()).toBe("data: one\n\n");
    res.end("data: two\n\n");
    const second = await reader.read();
    expect(Buffer.from(second.value ?? []).toString()).toBe("data: two\n\n");
    expect((await reader.read()).done).toBe(true);
  });

  it("decodes a gzip reply", async () => {
    const s = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json", "content-encoding": "gzip" });
      res.end(gzipSync(JSON.stringify({ text: "x".repeat(1000) })));
    });
    const res = await pooledFetch({ maxSockets: 4 })(s.url, { method: "POST", body: "{}" });
    expect(res.headers.get("content-encoding")).toBeNull();
    expect(await res.json()).toEqual({ text: "x".repeat(1000) });
  });

  it("gives an empty body for 204", async () => {
    const s = await serve((_req, res) => res.writeHead(204).end());
    const res = await pooledFetch({ maxSockets: 4 })(s.url, { method: "DELETE" });
    expect(res.status).toBe(204);
    expect(res.body).toBeNull();
  });

  it("reports an abort before and during the reply as fetch does (AbortError)", async () => {
    const held: ServerResponse[] = [];
    const s = await serve((_req, res) => {
      held.push(res);
      if (held.length === 2) res.writeHead(200).write("partial");
    });
    const f = pooledFetch({ maxSockets: 4 });
    const before = new AbortController();
    const waiting = f(s.url, { method: "POST", body: "{}", signal: before.signal });
    await waitFor(() => held.length === 1, 5000, "the first request");
    before.abort();
    await expect(waiting).rejects.toMatchObject({ name: "AbortError" });

    const during = new AbortController();
    const res = await f(s.url, { method: "POST", body: "{}", signal: during.signal });
    const reading = res.text();
    during.abort();
    await expect(reading).rejects.toMatchObject({ name: "AbortError" });
  });

  it("fails the reading of a reply whose connection is cut mid-body", async () => {
    const s = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json", "content-length": "100" });
      res.write('{"partial":');
      setImmediate(() => res.socket?.destroy());
    });
    const res = await pooledFetch({ maxSockets: 4 })(s.url, { method: "POST", body: "{}" });
    await expect(res.json()).rejects.toThrow();
  });

  it("rejects when the server cannot be reached", async () => {
    const s = await serve(() => undefined);
    const url = s.url;
    s.server.close();
    await once(s.server, "close");
    servers.splice(servers.indexOf(s.server), 1);
    await expect(pooledFetch({ maxSockets: 4 })(url, { method: "POST", body: "{}" })).rejects.toMatchObject({
      code: "ECONNREFUSED",
    });
  });

  it("leaves other bodies (an upload's form) to the built-in fetch", async () => {
    const s = await serve((req, res, body) => json(res, { type: req.headers["content-type"], body }));
    const form = new FormData();
    form.append("file", new Blob(["abc"]), "a.txt");
    const res = await pooledFetch({ maxSockets: 4 })(s.url, { method: "POST", body: form });
    const seen = (await res.json()) as { type: string; body: string };
    expect(seen.type).toMatch(/^multipart\/form-data; boundary=/);
    expect(seen.body).toContain("abc");
  });
});
