/**
 * MCP tools through a full agent turn: the AgentLoop on a bus, the real
 * OpenAI-compatible provider against the loopback FakeOpenAI, and real MCP
 * servers (the stdio script and a Streamable HTTP server).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ContextBuilder } from "../../src/agent/context.js";
import { AgentLoop } from "../../src/agent/loop.js";
import { MemoryFiles } from "../../src/agent/memory.js";
import { ToolRegistry } from "../../src/agent/tools/registry.js";
import { MessageBus } from "../../src/bus/bus.js";
import type { OutboundMessage } from "../../src/bus/types.js";
import { builtinSkillsDir } from "../../src/config/paths.js";
import { ConfigSchema } from "../../src/config/schema.js";
import { createProvider } from "../../src/llm/openai-provider.js";
import { McpManager } from "../../src/mcp/manager.js";
import { SessionStore } from "../../src/sessions/store.js";
import { FakeMcpHttpServer } from "../fakes/mcp-http-server.js";
import { stdioServerCommand } from "../fakes/mcp-stdio.js";
import { FakeOpenAI, toolCall, type FakeMessage } from "../fakes/openai-server.js";
import { isAlive, waitFor } from "./helpers.js";

interface Setup {
  bus: MessageBus;
  loop: AgentLoop;
  manager: McpManager;
  registry: ToolRegistry;
  fake: FakeOpenAI;
  outbound: OutboundMessage[];
  ask(content: string): Promise<OutboundMessage>;
  cleanup(): Promise<void>;
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(servers: Record<string, Record<string, unknown>>): Promise<Setup> {
  const workspace = await mkdtemp(join(tmpdir(), "palaver-mcp-agent-"));
  const fake = await FakeOpenAI.start();
  const config = ConfigSchema.parse({
    agents: {
      defaults: { workspace, provider: "custom", model: "fake-model", llm: { maxRetries: 0, timeout: 10 } },
    },
    providers: { custom: { apiKey: "test-key", apiBase: fake.baseURL } },
    tools: { mcpServers: servers },
  });
  const bus = new MessageBus();
  const registry = new ToolRegistry();
  const manager = new McpManager({ servers: config.tools.mcpServers, registry, workspace, env: {} });
  const loop = new AgentLoop({
    bus,
    provider: createProvider(config),
    tools: registry,
    sessions: new SessionStore(join(workspace, "sessions")),
    context: new ContextBuilder({ workspace, builtinSkillsDir: builtinSkillsDir() }),
    memory: new MemoryFiles(workspace),
    settings: {
      workspace,
      model: "fake-model",
      memoryWindow: 50,
      maxToolIterations: 5,
      maxConcurrentTurns: 2,
      toolResultMaxChars: config.tools.toolResultMaxChars,
    },
  });
  const outbound: OutboundMessage[] = [];
  const waiters: ((m: OutboundMessage) => void)[] = [];
  bus.onOutbound((msg) => {
    outbound.push(msg);
    if ((msg.kind ?? "final") === "final") waiters.shift()?.(msg);
  });
  loop.start();
  const cleanup = async () => {
    await loop.shutdown(1000);
    await manager.shutdown();
    await fake.close();
    await rm(workspace, { recursive: true, force: true });
  };
  cleanups.push(cleanup);
  return {
    bus,
    loop,
    manager,
    registry,
    fake,
    outbound,
    cleanup,
    ask(content) {
      const reply = new Promise<OutboundMessage>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no reply to "${content}"`)), 60_000); // ends a hung test only
        waiters.push((m) => {
          clearTimeout(timer);
          resolve(m);
        });
      });
      bus.publishInbound({ channel: "test", senderId: "u1", chatId: "c1", content });
      return reply;
    },
  };
}

const toolMessages = (messages: FakeMessage[]) => messages.filter((m) => m.role === "tool");

describe("MCP tools in an agent turn", () => {
  it("shows the model the server's tools and feeds their results back (stdio and Streamable HTTP)", async () => {
    const http = await FakeMcpHttpServer.start({ mode: "streamable-http" });
    cleanups.push(() => http.close());
    const s = await setup({
      local: stdioServerCommand(),
      remote: { url: http.url, tools: { allow: ["add"] } },
    });
    s.manager.startInBackground();
    await s.manager.ensureReady(60_000);

    s.fake.enqueue(
      {
        toolCalls: [
          toolCall("mcp_local_echo", { text: "ping" }),
          toolCall("mcp_remote_add", { a: 40, b: 2 }),
        ],
      },
      { content: "The server said pong-ish things." },
    );
    const reply = await s.ask("use the tools");
    expect(reply.content).toBe("The server said pong-ish things.");

    const first = s.fake.requests[0]!.body;
    const names = (first.tools ?? []).map((t) => t.function.name);
    expect(names).toEqual(expect.arrayContaining(["mcp_local_echo", "mcp_local_slow", "mcp_remote_add"]));
    expect(names.filter((n) => n.startsWith("mcp_remote_"))).toEqual(["mcp_remote_add"]);
    const add = first.tools!.find((t) => t.function.name === "mcp_remote_add")!;
    expect(add.function.parameters).toMatchObject({
      type: "object",
      properties: { a: { type: "number" }, b: { type: "number" } },
      required: ["a", "b"],
    });

    const results = toolMessages(s.fake.requests[1]!.body.messages).map((m) => m.content);
    expect(results).toEqual(["echo: ping", '{"sum":42}']);
  });

  it("tells the model when a call timed out, and the server got the cancellation", async () => {
    const s = await setup({ local: { ...stdioServerCommand(), toolTimeout: 0.3 } });
    await s.manager.ensureReady(60_000);
    s.fake.enqueue(
      { toolCalls: [toolCall("mcp_local_slow", { ms: 20_000 })] },
      { toolCalls: [toolCall("mcp_local_cancellations")] },
      { content: "That tool is too slow today." },
    );
    const reply = await s.ask("do the slow thing");
    expect(reply.content).toBe("That tool is too slow today.");
    const [timedOut] = toolMessages(s.fake.requests[1]!.body.messages);
    expect(timedOut!.content).toContain(
      "Error: mcp_local_slow did not finish within 0.3 s, so it was cancelled",
    );
    const [, cancellations] = toolMessages(s.fake.requests[2]!.body.messages);
    expect(JSON.parse(String(cancellations!.content))).toEqual([
      expect.stringContaining("Request timed out"),
    ]);
  });

  it("/stop cancels the MCP call of the running turn", async () => {
    const http = await FakeMcpHttpServer.start({ mode: "streamable-http" });
    cleanups.push(() => http.close());
    const s = await setup({ remote: { url: http.url } });
    await s.manager.ensureReady(60_000);
    s.fake.enqueue({ toolCalls: [toolCall("mcp_remote_slow", { ms: 20_000 })] });

    s.bus.publishInbound({ channel: "test", senderId: "u1", chatId: "c1", content: "slow please" });
    await waitFor(() => http.state.calls.includes("slow"), 5000, "the slow call to start");
    const stopped = await s.ask("/stop");
    expect(stopped.content).toBe("Stopped the running reply.");
    await waitFor(() => http.state.cancelled.length === 1, 5000, "the cancellation to reach the server");
    expect(http.state.cancelled[0]).toContain("stopped by user");
    await s.loop.idle();
    // The model was never asked again: the turn ended at the stop.
    expect(s.fake.requests).toHaveLength(1);
  });

  it("leaves no server process behind after shutdown", async () => {
    const s = await setup({ a: stdioServerCommand(), b: stdioServerCommand() });
    await s.manager.ensureReady(60_000);
    const pids = s.manager.status().map((r) => r.pid!);
    expect(pids).toHaveLength(2);
    for (const pid of pids) expect(isAlive(pid)).toBe(true);
    await s.cleanup();
    cleanups.length = 0;
    for (const pid of pids) expect(isAlive(pid)).toBe(false);
  });
});
