import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createWebSearchTool, formatResults } from "../../../../src/agent/tools/web/search.js";
import { makeContext } from "../helpers.js";

describe("web_search", () => {
  let server: Server | undefined;
  const seen: { url: URL; token: string | undefined }[] = [];

  async function fakeBrave(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
    server = createServer((req, res) => {
      seen.push({
        url: new URL(req.url ?? "/", "http://x"),
        token: req.headers["x-subscription-token"] as string,
      });
      handler(req, res);
    });
    await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  afterEach(async () => {
    vi.unstubAllEnvs();
    seen.length = 0;
    if (server) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server!.close(() => resolve()));
      server = undefined;
    }
  });

  const results = {
    web: {
      results: [
        {
          title: "Tea <strong>guide</strong>",
          url: "https://tea.example/",
          description: "All about &quot;tea&quot;",
        },
        { title: "Second", url: "https://two.example/", description: "More" },
        { title: "Third", url: "https://three.example/" },
      ],
    },
  };

  it("strips tags from snippets in linear time, also from a flood of '<'", async () => {
    const flood = "<".repeat(200_000);
    const description = `a <strong>bold</strong> ${flood}<i>x</i>`;
    const baseUrl = await fakeBrave((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ web: { results: [{ title: "A", url: "https://a.example/", description }] } }));
    });
    const tool = createWebSearchTool({ apiKey: "k", maxResults: 5, baseUrl });
    const out = await tool.execute({ query: "q" }, makeContext().ctx);
    expect(out).toContain(`a bold ${flood}x`);
    // The old `<[^>]*>` took 40+ s on this flood; linear stripping takes milliseconds.
  }, 30_000);

  it("queries Brave with the key and formats numbered results", async () => {
    const baseUrl = await fakeBrave((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(results));
    });
    const tool = createWebSearchTool({ apiKey: "brave-key", maxResults: 5, baseUrl });
    const out = await tool.execute({ query: "how to make tea", count: 3 }, makeContext().ctx);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.url.pathname).toBe("/res/v1/web/search");
    expect(seen[0]!.url.searchParams.get("q")).toBe("how to make tea");
    expect(seen[0]!.url.searchParams.get("count")).toBe("3");
    expect(seen[0]!.token).toBe("brave-key");
    expect(out).toBe(
      [
        "Results for: how to make tea",
        "",
        "1. Tea guide",
        "   https://tea.example/",
        '   All about "tea"',
        "",
        "2. Second",
        "   https://two.example/",
        "   More",
        "",
        "3. Third",
        "   https://three.example/",
      ].join("\n"),
    );
  });

  it("uses maxResults when no count is given, and BRAVE_API_KEY when the config has none", async () => {
    vi.stubEnv("BRAVE_API_KEY", "env-key");
    const baseUrl = await fakeBrave((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(results));
    });
    const tool = createWebSearchTool({ apiKey: "", maxResults: 2, baseUrl });
    const out = await tool.execute({ query: "tea" }, makeContext().ctx);
    expect(seen[0]!.url.searchParams.get("count")).toBe("2");
    expect(seen[0]!.token).toBe("env-key");
    expect(out).toContain("2. Second");
    expect(out).not.toContain("3. Third");
  });

  it("tells the model search is not configured when there is no key", async () => {
    vi.stubEnv("BRAVE_API_KEY", "");
    const tool = createWebSearchTool({ apiKey: "", maxResults: 5, baseUrl: "http://127.0.0.1:9" });
    const out = await tool.execute({ query: "tea" }, makeContext().ctx);
    expect(out).toMatch(/not configured/);
    expect(out).toContain("tools.web.search.apiKey");
  });

  it("explains a refused key and other HTTP failures", async () => {
    let status = 401;
    const baseUrl = await fakeBrave((_req, res) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end("{}");
    });
    const tool = createWebSearchTool({ apiKey: "bad", maxResults: 5, baseUrl });
    await expect(tool.execute({ query: "q" }, makeContext().ctx)).rejects.toThrow(
      /refused the key \(HTTP 401\)/,
    );
    status = 500;
    await expect(tool.execute({ query: "q" }, makeContext().ctx)).rejects.toThrow(/HTTP 500/);
  });

  it("says when there are no results", () => {
    expect(formatResults("zzz", [])).toBe("No results for: zzz");
  });
});
