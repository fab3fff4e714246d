import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { MAX_IDENTICAL_CALLS } from "../../src/agent/runner.js";
import { lastUserText } from "../fakes/openai-server.js";
import { startHarness, type Harness } from "../helpers/agent-harness.js";
import { waitFor } from "../helpers/wait.js";

let h: Harness;
afterEach(async () => {
  await h?.cleanup();
});

async function sessionLines(key = "test_chat"): Promise<Record<string, unknown>[]> {
  const file = join(h.workspace, "sessions", `${key}.jsonl`);
  if (!existsSync(file)) return [];
  return (await readFile(file, "utf8"))
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

const messagesOf = async (key?: string) => (await sessionLines(key)).filter((l) => l._type !== "metadata");

describe("agent loop, end to end through the openai SDK", () => {
  it("answers a plain message and saves the turn without the runtime context", async () => {
    h = await startHarness();
    h.fake!.enqueue({ content: "Hello! How can I help?" });
    const reply = await h.ask("chat", "hi there");
    expect(reply.content).toBe("Hello! How can I help?");
    expect(reply.channel).toBe("test");

    const sent = h.fake!.requests[0]!.body.messages as { role: string; content: unknown }[];
    expect(sent[0]!.role).toBe("system");
    expect(JSON.stringify(sent.at(-2))).toMatch(/Current time/);
    expect(sent.at(-1)).toMatchObject({ role: "user", content: "hi there" });

    const saved = await messagesOf();
    expect(saved.map((m) => [m.role, m.content])).toEqual([
      ["user", "hi there"],
      ["assistant", "Hello! How can I help?"],
    ]);
    expect(JSON.stringify(saved)).not.toMatch(/Current time/);
  });

  it("a turn run again once it was saved (cluster mode: its instance died after) sends its saved reply and does not run", async () => {
    h = await startHarness();
    h.fake!.enqueue({ content: "The answer is 42." });
    const first = await h.ask("chat", "what is it?", { turnId: "turn-7" });
    expect(first).toMatchObject({ content: "The answer is 42.", turnId: "turn-7" });

    const again = await h.ask("chat", "what is it?", { turnId: "turn-7" });
    expect(again).toMatchObject({ content: "The answer is 42.", turnId: "turn-7" });
    expect(h.fake!.requests).toHaveLength(1);
    expect((await messagesOf()).map((m) => [m.role, m.content])).toEqual([
      ["user", "what is it?"],
      ["assistant", "The answer is 42."],
    ]);

    // Another turn of the chat runs as usual.
    h.fake!.enqueue({ content: "Still 42." });
    expect((await h.ask("chat", "sure?", { turnId: "turn-8" })).content).toBe("Still 42.");
  });

  it("runs a two-step tool turn that writes a file, with progress and tool hints", async () => {
    h = await startHarness();
    h.fake!.enqueue(
      {
        content: "I'll write that down.",
        toolCalls: [{ name: "write_file", arguments: { path: "notes/todo.md", content: "- milk\n" } }],
      },
      { content: "Saved your list to notes/todo.md." },
    );
    const reply = await h.ask("chat", "note: buy milk");
    expect(reply.content).toBe("Saved your list to notes/todo.md.");
    expect(await readFile(join(h.workspace, "notes/todo.md"), "utf8")).toBe("- milk\n");

    const kinds = h.outbound.map((m) => [m.kind, m.content]);
    expect(kinds).toContainEqual(["progress", "I'll write that down."]);
    expect(kinds).toContainEqual(["toolHint", 'write_file("notes/todo.md")']);

    const second = h.fake!.requests[1]!.body.messages as {
      role: string;
      content: string;
      tool_call_id?: string;
    }[];
    const toolResult = second.find((m) => m.role === "tool");
    expect(toolResult?.content).toMatch(/notes\/todo\.md/);

    const saved = await messagesOf();
    expect(saved.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    expect(saved[3]!.tools_used).toEqual(["write_file"]);
  });

  it("feeds a tool error back to the model as text", async () => {
    h = await startHarness();
    h.fake!.enqueue(
      { toolCalls: [{ name: "read_file", arguments: { path: "missing.txt" } }] },
      { content: "That file does not exist." },
    );
    const reply = await h.ask("chat", "read missing.txt");
    expect(reply.content).toBe("That file does not exist.");
    const toolMsg = (h.fake!.requests[1]!.body.messages as { role: string; content: string }[]).find(
      (m) => m.role === "tool",
    );
    expect(toolMsg?.content).toMatch(/^Error: .*missing\.txt/);
  });

  it("gives the model an error result for arguments that are not valid JSON", async () => {
    h = await startHarness();
    h.fake!.enqueue(
      { toolCalls: [{ name: "read_file", arguments: '{"path": "a.txt"' }] },
      { content: "retrying" },
    );
    const reply = await h.ask("chat", "go");
    expect(reply.content).toBe("retrying");
    const toolMsg = (h.fake!.requests[1]!.body.messages as { role: string; content: string }[]).find(
      (m) => m.role === "tool",
    );
    expect(toolMsg?.content).toMatch(/not valid JSON/);
  });

  it("retries after 429 and 500, then answers", async () => {
    h = await startHarness();
    h.fake!.enqueue(
      { status: 429, headers: { "retry-after": "0" } },
      { status: 500 },
      { content: "third time lucky" },
    );
    const reply = await h.ask("chat", "hello");
    expect(reply.content).toBe("third time lucky");
    expect(h.fake!.requests).toHaveLength(3);
  });

  it("tells the user in plain words when the LLM keeps failing and leaves the session clean", async () => {
    h = await startHarness();
    h.fake!.setHandler(() => ({ status: 503 }));
    const reply = await h.ask("chat", "hello");
    expect(reply.content).not.toMatch(/at |Error:|\n\s+at /);
    expect(reply.content.toLowerCase()).toMatch(/language model|try again/);
    expect(h.fake!.requests).toHaveLength(3); // 1 + maxRetries (2)
    expect(await messagesOf()).toEqual([]);
  });

  it("at maxToolIterations, one final call without tools writes the answer", async () => {
    h = await startHarness({ config: { agents: { defaults: { maxToolIterations: 3 } } } });
    h.fake!.setHandler((req, n) =>
      req.body.tools
        ? { toolCalls: [{ name: "list_dir", arguments: { path: `.${"/.".repeat(n)}` } }] }
        : { content: "From the three listings: the folder is empty." },
    );
    const reply = await h.ask("chat", "loop forever");
    expect(reply.content).toBe("From the three listings: the folder is empty.");
    expect(h.fake!.requests).toHaveLength(4);
    const last = h.fake!.requests[3]!.body;
    expect(last.tools).toBeUndefined();
    expect(last.messages.filter((m) => m.role === "tool")).toHaveLength(3);
    expect(lastUserText(h.fake!.requests[3]!)).toMatch(/used all 3 tool steps/);
    // The request to answer is not saved; the answer is.
    const saved = await messagesOf();
    expect(saved.at(-1)).toMatchObject({ role: "assistant", content: reply.content });
    expect(JSON.stringify(saved)).not.toMatch(/used all 3 tool steps/);
  });

  it("says plainly where it stopped when the final call writes nothing either", async () => {
    h = await startHarness({ config: { agents: { defaults: { maxToolIterations: 2 } } } });
    h.fake!.setHandler((_req, n) => ({
      toolCalls: [{ name: "list_dir", arguments: { path: `.${"/.".repeat(n)}` } }],
    }));
    const reply = await h.ask("chat", "loop forever");
    expect(reply.content).toMatch(/stopped after 2 tool steps/);
    expect(h.fake!.requests).toHaveLength(3);
  });

  it('continues a reply cut off by finish_reason "length" and delivers one answer', async () => {
    h = await startHarness();
    h.fake!.enqueue(
      { content: "Part one, ", finishReason: "length" },
      { content: "part two, ", finishReason: "length" },
      { content: "part three.", finishReason: "stop" },
    );
    const reply = await h.ask("chat", "write a lot");
    expect(reply.content).toBe("Part one, part two, part three.");
    expect(h.fake!.requests).toHaveLength(3);
    const third = h.fake!.requests[2]!.body.messages;
    expect(third.filter((m) => m.role === "assistant").map((m) => m.content)).toEqual([
      "Part one, ",
      "part two, ",
    ]);
    expect(lastUserText(h.fake!.requests[2]!)).toMatch(/cut off.*Continue exactly where it stopped/);
    const saved = await messagesOf();
    expect(saved.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(saved[1]!.content).toBe("Part one, part two, part three.");
  });

  it("marks the answer as cut off once maxContinuations is used up", async () => {
    h = await startHarness({ config: { agents: { defaults: { maxContinuations: 1 } } } });
    h.fake!.setHandler(() => ({ content: "more ", finishReason: "length" }));
    const reply = await h.ask("chat", "write forever");
    expect(reply.content).toMatch(/^more more \n\n\(Cut off: .*maxTokens/);
    expect(h.fake!.requests).toHaveLength(2);
  });

  it(`refuses the same tool call repeated ${MAX_IDENTICAL_CALLS} times in a turn`, async () => {
    h = await startHarness();
    const same = { toolCalls: [{ name: "list_dir", arguments: { path: "." } }] };
    h.fake!.enqueue(same, same, same, { content: "done" });
    const reply = await h.ask("chat", "list");
    expect(reply.content).toBe("done");
    const lastPrompt = h.fake!.requests[3]!.body.messages as { role: string; content: string }[];
    const results = lastPrompt.filter((m) => m.role === "tool").map((m) => m.content);
    expect(results).toHaveLength(3);
    expect(results[0]).not.toMatch(/refused/);
    expect(results[1]).not.toMatch(/refused/);
    expect(results[2]).toMatch(/refused.*exactly these arguments 2 times/);
  });

  it("runs two chats concurrently while keeping each chat's messages in order", async () => {
    h = await startHarness({ config: { agents: { defaults: { maxConcurrentTurns: 4 } } } });
    // a1 and b1 are each held until the other has reached the LLM: they only
    // get answered if the two chats run at once (in series they would wait forever).
    const asked = (text: string) => h.fake!.requests.some((r) => lastUserText(r) === text);
    h.fake!.setHandler(async (req) => {
      const text = lastUserText(req);
      if (text === "a1" || text === "b1") {
        await waitFor(() => asked("a1") && asked("b1"), 30_000, "a1 and b1 at the LLM together");
      }
      return { content: `re: ${text}` };
    });

    const a1 = h.ask("a", "a1");
    const a2 = h.ask("a", "a2");
    const b1 = h.ask("b", "b1");
    const replies = await Promise.all([a1, a2, b1]);

    expect(replies.map((r) => r.content)).toEqual(["re: a1", "re: a2", "re: b1"]);
    const finalsForA = h.outbound.filter((m) => m.chatId === "a").map((m) => m.content);
    expect(finalsForA).toEqual(["re: a1", "re: a2"]);
    // a2's prompt already contains a1's turn.
    const a2Request = h.fake!.requests.find((r) => lastUserText(r) === "a2")!;
    expect(JSON.stringify(a2Request.body.messages)).toContain("re: a1");
  });

  it("/stop cancels the running turn at once and saves nothing of it", async () => {
    h = await startHarness();
    // Far longer than any test: /stop is answered only if it does not wait for the turn.
    h.fake!.setHandler(() => ({ content: "too late", delayMs: 120_000 }));
    h.send("chat", "slow question");
    await waitFor(() => h.fake!.requests.length === 1);
    const stopReply = await h.ask("chat", "/stop");
    expect(stopReply.content).toMatch(/Stopped/);
    await h.loop.idle();
    expect(h.outbound.map((m) => m.content)).not.toContain("too late");
    expect(await messagesOf()).toEqual([]);
  });

  it("suppresses the final reply when the message tool already answered this chat", async () => {
    h = await startHarness();
    h.fake!.enqueue(
      { toolCalls: [{ name: "message", arguments: { content: "Here you go!" } }] },
      { content: "I sent it." },
    );
    const reply = await h.ask("chat", "send me something");
    expect(reply.content).toBe("Here you go!");
    await h.loop.idle();
    expect(h.outbound.filter((m) => (m.kind ?? "final") === "final").map((m) => m.content)).toEqual([
      "Here you go!",
    ]);
  });

  it("answers /help without calling the model", async () => {
    h = await startHarness();
    expect((await h.ask("chat", "/help")).content).toMatch(/\/new[\s\S]*\/stop[\s\S]*\/status/);
    expect(h.fake!.requests).toHaveLength(0);
  });

  it("passes unknown /commands to the model as text", async () => {
    h = await startHarness();
    h.fake!.enqueue({ content: "No idea what /weather is." });
    expect((await h.ask("chat", "/weather Paris")).content).toBe("No idea what /weather is.");
    expect(lastUserText(h.fake!.requests[0]!)).toBe("/weather Paris");
  });
});
