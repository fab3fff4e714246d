/**
 * The build in dist/ (bundled by scripts/build-server.mjs) is what `npm start` and the systemd
 * unit run, while every other test runs the sources through tsx. These run the bundle itself, so a
 * package that breaks when bundled (a runtime require, a file read beside its own module) fails
 * here: the CLI (a bad config too: zod runs with its translations stubbed out), a gateway
 * answering on Telegram (grammy without node-fetch, prom-client without OpenTelemetry) with a tool
 * from an MCP server (its lazily loaded SDK) in the turn, one answering on Discord (whose REST client the
 * bundle swaps for its fetch-based build: scripts/build-server.mjs), one answering on Slack
 * (whose Socket Mode client gets only the parts of undici it uses), and one on all three that
 * never loads Node's built-in fetch (every API client goes through pooledFetch). The CommonJS
 * packages (the platforms' SDKs among them) are files of their own in dist/cjs/, compiled from the
 * code caches the build wrote.
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { FakeDiscord } from "./fakes/discord-server.js";
import { stdioServerCommand } from "./fakes/mcp-stdio.js";
import { toolCall } from "./fakes/openai-server.js";
import { dmEvent, FakeSlack } from "./fakes/slack-server.js";
import { ROOT, runCli } from "./helpers/cli.js";
import { DIST_MAIN, ensureBuilt } from "./helpers/dist.js";
import { loadInFreshNode } from "./helpers/fresh-load.js";
import { GatewayHarness, healthUrlFromLog, writeGatewayConfig } from "./helpers/gateway-process.js";
import { waitFor } from "./helpers/wait.js";

beforeAll(() => {
  const problem = ensureBuilt();
  if (problem) throw new Error(problem);
}, 180_000);

describe("the packages bundled as CommonJS (dist/cjs/)", () => {
  it("are compiled from the code caches the build wrote", async () => {
    const groups = ["core", "telegram", "slack", "discord"];
    const files = groups.map((group) => join(ROOT, "dist", "cjs", `${group}.cjs`));
    const loaded = await loadInFreshNode(files);
    expect(loaded.map((file) => file.use)).toEqual(groups.map(() => "used"));
  }, 90_000);
});

describe("the bundled build (dist/main.js)", { timeout: 120_000 }, () => {
  const h = new GatewayHarness({ prefix: "palaver-dist-", entry: DIST_MAIN });
  beforeEach(() => h.start());
  afterEach(() => h.close());

  it("prints the package's version", async () => {
    const { version } = JSON.parse(await readFile(join(ROOT, "package.json"), "utf8")) as { version: string };
    const run = await runCli(["--version"], { cwd: h.dir, entry: DIST_MAIN });
    expect(run.stderr).toBe("");
    expect(run.stdout.trim()).toBe(version);
    expect(run.code).toBe(0);
  });

  it("names what is wrong in a bad config (zod, with its unused parts left out of the bundle)", async () => {
    const path = join(h.dir, "bad.json");
    await writeFile(path, JSON.stringify({ agents: { defaults: { maxTokens: -3, temperature: "hot" } } }));
    const run = await runCli(["status", "--config", path], { cwd: h.dir, entry: DIST_MAIN });
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
    // prom-client's default metrics, with its OpenTelemetry import stubbed out in the bundle.
    const metrics = await (await fetch(`${healthUrlFromLog(run.stderr)!}/metrics`)).text();
    expect(metrics).toMatch(/^palaver_process_cpu_seconds_total \d/m);

    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
    expect(run.stderr).not.toMatch(/"level":(50|60)/);
  });

  it("answers on Discord: gateway address from the API, a DM in, the reply out, then stops cleanly", async () => {
    const discord = await FakeDiscord.start();
    h.onClose(() => discord.close());
    const alice = discord.addUser("alice");
    const dm = discord.dmChannel(alice);
    h.configPath = await writeGatewayConfig(h.dir, { llmBaseURL: h.llm.baseURL, discord });
    h.llm.setHandler(() => ({ content: "pong" }));
    const run = await h.startGatewayWhen(() => discord.liveConnection !== null);

    discord.userMessage({ channelId: dm.id, author: alice, content: "ping" });
    const reply = await discord.waitFor(
      () => discord.sent.find((m) => m.channelId === dm.id),
      30_000,
      "the reply",
    );
    expect(reply.content).toBe("pong");
    expect(discord.calls("GET", "/gateway/bot")).toHaveLength(1);

    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
    expect(run.stderr).not.toMatch(/"level":(50|60)/);
  });

  it("answers on Slack: Socket Mode on the bundle's slim undici, a DM in, the reply out, then stops cleanly", async () => {
    const slack = await FakeSlack.start({ ackTimeoutMs: 30_000 });
    h.onClose(() => slack.close());
    h.configPath = await writeGatewayConfig(h.dir, { llmBaseURL: h.llm.baseURL, slack });
    h.llm.setHandler(() => ({ content: "pong" }));
    // Connected: undici's WebSocket (its handshake is a fetch, undici's), its Agent and its connector.
    const run = await h.startGatewayWhen(() => slack.connected);

    // Resolves with the ack palaver sent back over that WebSocket (a MessageEvent in, a frame out).
    await slack.pushEvent(dmEvent("ping"));
    const [reply] = await slack.waitForCalls("chat.postMessage", 1, 30_000);
    expect(reply!.params).toMatchObject({ channel: "D1", text: "pong" });
    expect(slack.callsTo("apps.connections.open")).toHaveLength(1);

    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
    expect(run.stderr).not.toMatch(/"level":(50|60)/);
    // socket-mode checks each event's class (undici's ErrorEvent, MessageEvent, CloseEvent) and only
    // warns when one is not: it would, were the stub's classes not the ones its WebSocket uses.
    expect(run.stderr).not.toMatch(/Expected \w+ but received/);
  });

  it("starts Telegram, Slack and Discord", async () => {
    const discord = await FakeDiscord.start();
    const slack = await FakeSlack.start({ ackTimeoutMs: 30_000 });
    h.onClose(() => discord.close());
    h.onClose(() => slack.close());
    const fakes = { llmBaseURL: h.llm.baseURL, telegram: h.tg, slack, discord };
    const configPath = await writeGatewayConfig(h.dir, fakes);
    const run = h.spawnGateway({ configPath });
    await waitFor(
      () =>
        run.stderr.includes('"msg":"gateway running"') && slack.connected && discord.liveConnection !== null,
      h.startupMs,
      "the gateway running on all three platforms",
    );

    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
  });
});
