/**
 * The conversation lifecycle through the whole agent (loop, consolidation,
 * subagents, cron view) with the fake LLM behind the real openai SDK.
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { systemMessage } from "../../src/bus/types.js";
import { lastUserText, type FakeReply, type RecordedRequest } from "../fakes/openai-server.js";
import { startHarness, type Harness } from "../helpers/agent-harness.js";
import { createGate } from "../helpers/gate.js";
import { waitFor } from "../helpers/wait.js";

let h: Harness;
afterEach(async () => {
  await h?.cleanup();
});

type Kind = "consolidation" | "subagent" | "turn";
function kindOf(req: RecordedRequest): Kind {
  if (req.body.tools?.some((t) => t.function.name === "save_memory")) return "consolidation";
  if (String(req.body.messages[0]?.content).startsWith("# Subagent")) return "subagent";
  return "turn";
}

/** Routes each request of the fake LLM by what it is for. */
function route(handlers: Partial<Record<Kind, (req: RecordedRequest) => FakeReply | Promise<FakeReply>>>) {
  h.fake!.setHandler((req) => handlers[kindOf(req)]?.(req) ?? { content: `re: ${lastUserText(req)}` });
}

const saveMemory = (history_entry: string, memory_update: string): FakeReply => ({
  toolCalls: [{ name: "save_memory", arguments: { history_entry, memory_update } }],
});

const finals = () => h.outbound.filter((m) => (m.kind ?? "final") === "final");
const requestsOf = (kind: Kind) => h.fake!.requests.filter((r) => kindOf(r) === kind);
const readWs = (path: string) => readFile(join(h.workspace, path), "utf8");

describe("/new", () => {
  it("archives the conversation into MEMORY.md and HISTORY.md, then clears the session", async () => {
    h = await startHarness();
    route({
      consolidation: () =>
        saveMemory("[2026-11-22 10:00] User shared their number, 42.", "# Memory\n- Number: 42\n"),
    });
    await h.ask("chat", "my number is 42");

    const reply = await h.ask("chat", "/new");
    expect(reply.content).toMatch(/New conversation started/);
    const archived = requestsOf("consolidation")[0]!;
    expect(JSON.stringify(archived.body.messages)).toContain("my number is 42");
    expect(await readWs("memory/MEMORY.md")).toBe("# Memory\n- Number: 42\n");
    expect(await readWs("memory/HISTORY.md")).toContain("User shared their number, 42.");

    const session = await h.sessions.get("test:chat");
    expect(session.messages).toEqual([]);
    await h.ask("chat", "hello again");
    const last = h.fake!.requests.at(-1)!;
    expect(JSON.stringify(last.body.messages)).not.toContain("my number is 42");
    // The memory reaches the model through the system prompt instead.
    expect(String(last.body.messages[0]!.content)).toContain("Number: 42");
  });

  it("keeps the session and says so when archiving fails", async () => {
    h = await startHarness();
    route({ consolidation: () => ({ status: 500 }) });
    await h.ask("chat", "remember my cat is called Tom");

    const reply = await h.ask("chat", "/new");
    expect(reply.content).toMatch(/couldn't save this conversation.*kept it/);
    const session = await h.sessions.get("test:chat");
    expect(session.messages.map((m) => m.content)).toContain("remember my cat is called Tom");
    expect(existsSync(join(h.workspace, "memory/HISTORY.md"))).toBe(false);
  });
});

describe("memory consolidation in the background", () => {
  it("starts at the memory window without delaying the reply, and never twice at once", async () => {
    h = await startHarness({ config: { agents: { defaults: { memoryWindow: 4 } } } });
    // The consolidation is held until the end: replies that come meanwhile did not wait for it.
    const gate = createGate();
    route({
      consolidation: async () => {
        await gate.opened;
        return saveMemory("[2026-11-22 10:00] Chatted.", "# Memory\n- chatted\n");
      },
    });
    await h.ask("chat", "one");
    expect(requestsOf("consolidation")).toHaveLength(0);

    await h.ask("chat", "two"); // 4 messages now: the window is reached, and the reply still came
    await waitFor(() => requestsOf("consolidation").length === 1);

    await h.ask("chat", "three"); // while the first consolidation is still running
    expect(requestsOf("consolidation")).toHaveLength(1);

    gate.open();
    await h.consolidator.drain(30_000);
    const session = await h.sessions.get("test:chat");
    expect(session.lastConsolidated).toBe(2); // 4 messages, half kept
    expect(await readWs("memory/MEMORY.md")).toBe("# Memory\n- chatted\n");
    const metadataLines = (await readFile(h.sessions.pathFor("test:chat"), "utf8"))
      .split("\n")
      .filter((l) => l.includes('"_type":"metadata"'));
    expect(metadataLines.at(-1)).toContain('"last_consolidated":2');
  });
});

describe("subagents", () => {
  it("reports a spawned task's result back into the chat and saves the exchange in its session", async () => {
    h = await startHarness();
    route({
      turn: (req) => {
        const text = lastUserText(req);
        if (text === "research cats") {
          return req.body.messages.at(-1)!.role === "tool"
            ? { content: "I've started looking into it." }
            : {
                toolCalls: [
                  { name: "spawn", arguments: { task: "Find three cat facts", label: "cat facts" } },
                ],
              };
        }
        if (text.startsWith('[Subagent "cat facts" completed'))
          return { content: "Cats sleep 16 hours a day!" };
        return { content: `re: ${text}` };
      },
      subagent: () => ({ content: "Cats sleep 12-16 hours daily." }),
    });
    const reply = await h.ask("chat", "research cats", { threadId: "T1" });
    expect(reply.content).toBe("I've started looking into it.");
    await waitFor(() => finals().length === 2);
    expect(finals()[1]).toMatchObject({
      channel: "test",
      chatId: "chat",
      content: "Cats sleep 16 hours a day!",
      threadId: "T1",
    });
    await h.loop.idle();
    const contents = (await h.sessions.get("test:chat")).messages.map((m) => JSON.stringify(m.content));
    expect(contents.some((c) => c.includes("Cats sleep 12-16 hours daily."))).toBe(true);
    expect(contents.at(-1)).toBe(JSON.stringify("Cats sleep 16 hours a day!"));
  });

  it("/stop cancels the chat's running subagents at once and nothing is reported later", async () => {
    h = await startHarness();
    route({
      turn: (req) =>
        lastUserText(req) === "start it" && req.body.messages.at(-1)!.role !== "tool"
          ? { toolCalls: [{ name: "spawn", arguments: { task: "A very long job" } }] }
          : { content: `re: ${lastUserText(req)}` },
      // Far longer than any test: /stop can only be answered by not waiting for it.
      subagent: () => ({ content: "finished", delayMs: 120_000 }),
    });
    await h.ask("chat", "start it");
    await waitFor(() => requestsOf("subagent").length === 1);
    expect((await h.ask("chat", "/status")).content).toMatch(/Background tasks: A very long job/);
    await h.loop.idle(); // the /status turn has fully ended

    const stop = await h.ask("chat", "/stop");
    expect(stop.content).toBe("Stopped 1 background task.");
    await h.subagents.shutdown(30_000); // settles at once: the LLM call was aborted
    await h.loop.idle();
    expect(finals().map((m) => m.content)).not.toContain("re: finished");
    expect((await h.ask("chat", "/status")).content).toMatch(/Background tasks: none/);
  });
});

describe("/status", () => {
  it("shows model, session size, memory size and this chat's next cron jobs", async () => {
    h = await startHarness();
    await h.cron.add({
      name: "Water the plants",
      message: "Remind me to water the plants",
      schedule: { kind: "every", everyMs: 3_600_000 },
      channel: "test",
      to: "chat",
    });
    await h.ask("chat", "hi");
    const status = (await h.ask("chat", "/status")).content;
    expect(status).toMatch(/Model: fake-model/);
    expect(status).toMatch(/Session: 2 messages/);
    expect(status).toMatch(/Memory: \d+ characters/);
    expect(status).toMatch(/Next scheduled: Water the plants at /);
  });
});

describe("background turns", () => {
  it("never delivers a heartbeat reply that means nothing to do", async () => {
    h = await startHarness();
    route({ turn: () => ({ content: "HEARTBEAT_OK" }) });
    h.bus.publishInbound(
      systemMessage({
        senderId: "heartbeat",
        content: "[Heartbeat] check the inbox",
        origin: { channel: "test", chatId: "chat" },
        sessionKey: "heartbeat",
      }),
    );
    await waitFor(() => h.fake!.requests.length === 1);
    await h.loop.idle();
    expect(finals()).toEqual([]);
  });
});
