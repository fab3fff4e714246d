import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SubagentManager } from "../../../src/agent/subagents.js";
import { createWorkerTools } from "../../../src/agent/tools/index.js";
import { ToolRegistry } from "../../../src/agent/tools/registry.js";
import { createSpawnTool } from "../../../src/agent/tools/spawn.js";
import { MessageBus } from "../../../src/bus/bus.js";
import type { InboundMessage } from "../../../src/bus/types.js";
import { ConfigSchema } from "../../../src/config/schema.js";
import { FakeOpenAI } from "../../fakes/openai-server.js";
import { TempDirs, makeContext } from "./helpers.js";
import { waitFor } from "../../helpers/wait.js";
import { fakeProvider } from "../../helpers/fake-provider.js";

const temps = new TempDirs();
let fake: FakeOpenAI;
let bus: MessageBus;
let inbound: InboundMessage[];
let manager: SubagentManager;
let registry: ToolRegistry;

beforeEach(async () => {
  fake = await FakeOpenAI.start();
  const workspace = await temps.make();
  bus = new MessageBus();
  inbound = [];
  bus.onInbound((msg) => inbound.push(msg));
  manager = new SubagentManager({
    provider: fakeProvider(fake),
    tools: createWorkerTools(ConfigSchema.parse({}), workspace),
    bus,
    workspace,
    maxConcurrent: 1,
    maxIterations: 3,
    toolResultMaxChars: 4000,
    log: pino({ level: "silent" }),
  });
  registry = new ToolRegistry();
  registry.register(createSpawnTool(manager));
});

afterEach(async () => {
  await manager.shutdown(2000);
  await fake.close();
  await temps.cleanup();
});

const call = (args: Record<string, unknown>) => ({
  id: "call_1",
  name: "spawn",
  arguments: args,
  rawArguments: JSON.stringify(args),
});

describe("spawn tool", () => {
  it("has nanobot's name and parameters", () => {
    const def = registry.definitions()[0]!.function;
    expect(def.name).toBe("spawn");
    const params = def.parameters as { properties: Record<string, unknown>; required?: string[] };
    expect(Object.keys(params.properties)).toEqual(["task", "label", "agent"]);
    expect(params.required).toEqual(["task"]);
  });

  it("starts a subagent for the turn's chat and thread and says so", async () => {
    // 200+ characters: a shorter result would get a follow-up asking for details.
    fake.enqueue({
      content: `It is sunny. ${"Clear skies all day, 24 degrees, light wind. ".repeat(5)}`,
      delayMs: 100,
    });
    const { ctx } = makeContext({
      channel: "slack",
      chatId: "C42",
      sessionKey: "slack:C42:1700000000.000100",
      threadId: "1700000000.000100",
      metadata: { channelType: "channel" },
    });
    const text = await registry.execute(call({ task: "Check the weather in Paris", label: "weather" }), ctx);

    const [running] = manager.listForSession("slack:C42:1700000000.000100");
    expect(running?.label).toBe("weather");
    expect(text).toBe(`Subagent "weather" started (id ${running!.id}). I'll report back when it finishes.`);

    await waitFor(() => inbound.length === 1);
    expect(inbound[0]!.chatId).toBe("slack:C42");
    expect(inbound[0]!.sessionKey).toBe("slack:C42:1700000000.000100");
    expect(inbound[0]!.metadata?.origin).toEqual({
      channel: "slack",
      chatId: "C42",
      sessionKey: "slack:C42:1700000000.000100",
      threadId: "1700000000.000100",
      metadata: { channelType: "channel" },
    });
    expect(inbound[0]!.content).toContain("It is sunny.");
  });

  it("says queued when every slot is taken, and labels by the task when no label is given", async () => {
    fake.setHandler(() => ({ content: "done", delayMs: 5000 }));
    const { ctx } = makeContext();
    const first = await registry.execute(call({ task: "first job" }), ctx);
    expect(first).toMatch(/^Subagent "first job" started \(id [0-9a-f]{8}\)\./);
    const second = await registry.execute(
      call({ task: "A second job with a rather long description of what to do" }),
      ctx,
    );
    expect(second).toMatch(
      /^Subagent "A second job with a rather lon…" queued \(id [0-9a-f]{8}\); it starts when another one finishes\./,
    );
    expect(manager.listForSession("cli:direct")).toHaveLength(2);
  });

  it("refuses an empty task", async () => {
    const { ctx } = makeContext();
    expect(await registry.execute(call({ task: "  " }), ctx)).toMatch(/^Error: the task is empty/);
    expect(manager.listForSession("cli:direct")).toEqual([]);
  });
});
