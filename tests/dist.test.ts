/**
 * The build in dist/ (scripts/build-server.mjs), which `npm start`, the systemd unit and every
 * child-process test run: palaver's own sources only, its packages left to Node to resolve from
 * node_modules; the Node version checked before anything loads; and a gateway on it answering with
 * a lazily loaded part (the MCP SDK) in the turn. Slack and Discord gateways on the build are
 * tests/daemon/crash-platforms.test.ts.
 */
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { stdioServerCommand } from "./fakes/mcp-stdio.js";
import { toolCall } from "./fakes/openai-server.js";
import { ROOT, runCli } from "./helpers/cli.js";
import { GatewayHarness, healthUrlFromLog, writeGatewayConfig } from "./helpers/gateway-process.js";

const DIST = join(ROOT, "dist");

describe("the build's files", () => {
  it("hold palaver's sources only: no package from node_modules is bundled in", async () => {
    const maps = (await readdir(DIST, { recursive: true, encoding: "utf8" })).filter(
      (name) => name.endsWith(".js.map") && !name.startsWith("web"),
    );
    const sources: string[] = [];
    for (const map of maps) {
      const { sources: files } = JSON.parse(await readFile(join(DIST, map), "utf8")) as { sources: string[] };
      sources.push(...files);
    }
    // The probe works: the entry and a platform's adapter are there.
    expect(sources.some((file) => file.endsWith("src/main.ts"))).toBe(true);
    expect(sources.some((file) => file.endsWith("src/channels/telegram/adapter.ts"))).toBe(true);
    expect(sources.filter((file) => !/(^|\/)src\//.test(file))).toEqual([]);
    expect(sources.filter((file) => file.includes("node_modules"))).toEqual([]);
  });

  it("import the packages by name, for Node to resolve at run time", async () => {
    const names = await readdir(join(DIST, "channels", "telegram"));
    const adapter = names.find((name) => /^adapter-\w+\.js$/.test(name));
    expect(adapter).toBeDefined();
    const code = await readFile(join(DIST, "channels", "telegram", adapter!), "utf8");
    expect(code).toMatch(/from "grammy"/);
  });
});

describe("the built CLI (dist/main.js)", { timeout: 120_000 }, () => {
  const h = new GatewayHarness({ prefix: "palaver-dist-" });
  beforeEach(() => h.start());
  afterEach(() => h.close());

  it("prints the package's version", async () => {
    const { version } = JSON.parse(await readFile(join(ROOT, "package.json"), "utf8")) as { version: string };
    const run = await runCli(["--version"], { cwd: h.dir });
    expect(run.stderr).toBe("");
    expect(run.stdout.trim()).toBe(version);
    expect(run.code).toBe(0);
  });

  it("on a Node older than it supports, says so in one line and exits 1", async () => {
    // Node's version as palaver reads it, made older before the entry runs.
    const older = `Object.defineProperty(process.versions, "node", { value: "22.12.0" });`;
    const run = await runCli(["--version"], {
      cwd: h.dir,
      env: { NODE_OPTIONS: `--import "data:text/javascript,${encodeURIComponent(older)}"` },
    });
    expect(run.stderr).toBe(
      "palaver needs Node.js 22.13.0 or newer; this is Node.js 22.12.0 (install a current LTS from https://nodejs.org)\n",
    );
    expect(run.stdout).toBe("");
    expect(run.code).toBe(1);
  });

  it("names what is wrong in a bad config", async () => {
    const path = join(h.dir, "bad.json");
    await writeFile(path, JSON.stringify({ agents: { defaults: { maxTokens: -3, temperature: "hot" } } }));
    const run = await runCli(["status", "--config", path], { cwd: h.dir });
    expect(run.stderr).toContain("agents.defaults.maxTokens: expected a number > 0, got -3");
    expect(run.stderr).toContain('agents.defaults.temperature: expected a number, got "hot"');
    expect(run.code).toBe(78);
  });

  it("answers on Telegram with an MCP server's tool in the turn, then stops cleanly", async () => {
    await writeGatewayConfig(
      h.dir,
      { llmBaseURL: h.llm.baseURL, telegram: h.tg },
      { tools: { mcpServers: { local: stdioServerCommand() } } },
    );
    h.llm.setHandler((req) => {
      const result = req.body.messages.find((m) => m.role === "tool");
      if (result) return { content: `the server said: ${String(result.content)}` };
      return { toolCalls: [toolCall("mcp_local_echo", { text: "ping" })] };
    });
    const run = await h.startGateway();
    await run.stderrIncludes('MCP server \\"local\\" connected');

    h.tg.userMessage({ text: "use the tool" });
    const reply = await h.tg.waitForSent(() => true, 30_000);
    expect(reply.text).toBe("the server said: echo: ping");
    const offered = h.llm.requests[0]!.body.tools?.map((t) => t.function.name);
    expect(offered).toContain("mcp_local_echo");
    // prom-client's default metrics.
    const metrics = await (await fetch(`${healthUrlFromLog(run.stderr)!}/metrics`)).text();
    expect(metrics).toMatch(/^palaver_process_cpu_seconds_total \d/m);

    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
    expect(run.stderr).not.toMatch(/"level":(50|60)/);
  });
});
