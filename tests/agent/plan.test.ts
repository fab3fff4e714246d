/**
 * The plan (todo_write / todo_read) through the agent and the fake LLM: kept in the session's
 * metadata, its reminder line in every call's runtime context while items are open and never in
 * the session file, and plan churn answered with a note to act.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { RUNTIME_CONTEXT_TAG } from "../../src/agent/context.js";
import { toolCall, type RecordedRequest } from "../fakes/openai-server.js";
import { startHarness, type Harness } from "../helpers/agent-harness.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

const PLAN = [
  { text: "Read the notes", status: "in_progress" },
  { text: "Sum the amounts", status: "pending" },
  { text: "Write report.md", status: "pending" },
  { text: "Tell the user", status: "pending" },
];

function runtimeContext(req: RecordedRequest): string {
  const msg = req.body.messages.findLast(
    (m) => m.role === "user" && String(m.content).startsWith(RUNTIME_CONTEXT_TAG),
  );
  return String(msg?.content);
}

const toolResults = (req: RecordedRequest) =>
  req.body.messages.filter((m) => m.role === "tool").map((m) => String(m.content));

describe("the plan", () => {
  it("rides in every call's runtime context while items are open, and never in the session file", async () => {
    h = await startHarness();
    const reminder = "Now: Read the notes; next: Sum the amounts; 2 more";
    h.fake!.enqueue(
      { toolCalls: [toolCall("todo_write", { items: PLAN })] },
      { toolCalls: [toolCall("list_dir", { path: "." })] },
      { content: "working on it" },
      { toolCalls: [toolCall("todo_read")] },
      { content: "still on it" },
    );
    await h.ask("chat", "make the monthly report");
    await h.ask("chat", "how far are you?");
    const calls = h.fake!.requests;
    expect(calls).toHaveLength(5);
    expect(runtimeContext(calls[0]!)).not.toContain("Now:");
    // From the call after todo_write on, in this turn and the next.
    for (const call of calls.slice(1)) expect(runtimeContext(call)).toContain(reminder);
    expect(toolResults(calls[4]!).at(-1)).toBe(
      "▶ Read the notes\n☐ Sum the amounts\n☐ Write report.md\n☐ Tell the user",
    );

    const file = await readFile(join(h.workspace, "sessions", "test_chat.jsonl"), "utf8");
    expect(file).not.toContain("Now:");
    expect(file).not.toContain(RUNTIME_CONTEXT_TAG);
    const metadata = file
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { _type?: string; metadata?: Record<string, unknown> })
      .findLast((l) => l._type === "metadata");
    expect(metadata?.metadata?.palaver_plan).toMatchObject({
      items: PLAN.map((item, i) => ({ ...item, id: String(i + 1) })),
    });
  });

  it("is dropped by /new", async () => {
    h = await startHarness();
    h.fake!.enqueue({ toolCalls: [toolCall("todo_write", { items: PLAN })] }, { content: "planned" });
    await h.ask("chat", "plan it");
    // /new archives the conversation into memory first.
    h.fake!.enqueue({
      toolCalls: [
        toolCall("save_memory", {
          history_entry: "[2026-01-01 10:00] Planned a report.",
          memory_update: "# Memory",
        }),
      ],
    });
    expect((await h.ask("chat", "/new")).content).toMatch(/^New conversation started/);
    h.fake!.enqueue({ toolCalls: [toolCall("todo_read")] }, { content: "fresh" });
    await h.ask("chat", "hello again");
    const [first, second] = h.fake!.requests.slice(-2) as [RecordedRequest, RecordedRequest];
    expect(runtimeContext(first)).not.toContain("Now:");
    expect(toolResults(second).at(-1)).toBe("No plan yet.");
  });

  it("stops riding once every item is done", async () => {
    h = await startHarness();
    const done = PLAN.map((item) => ({ ...item, status: "done" }));
    h.fake!.enqueue({ toolCalls: [toolCall("todo_write", { items: done })] }, { content: "all done" });
    await h.ask("chat", "finish");
    expect(toolResults(h.fake!.requests[1]!)[0]).toMatch(/^Plan saved \(0 of 4 open\)/);
    expect(runtimeContext(h.fake!.requests[1]!)).not.toContain("Now:");
  });

  it("answers the same plan written a third time without progress with a note to act", async () => {
    h = await startHarness();
    const write = { toolCalls: [toolCall("todo_write", { items: PLAN })] };
    const moved = PLAN.map((item, i) => ({
      ...item,
      status: i === 0 ? "done" : i === 1 ? "in_progress" : "pending",
    }));
    // The third write comes in the next turn (a third identical call in one turn is refused anyway).
    h.fake!.enqueue(write, write, { content: "planned" });
    h.fake!.enqueue(write, { toolCalls: [toolCall("todo_write", { items: moved })] }, { content: "ok" });
    await h.ask("chat", "plan it");
    await h.ask("chat", "go on");
    const results = [...toolResults(h.fake!.requests[2]!), ...toolResults(h.fake!.requests[5]!).slice(-2)];
    expect(results[0]).toMatch(/^Plan saved \(4 of 4 open\)/);
    expect(results[1]).toMatch(/^Plan saved/);
    expect(results[2]).toMatch(/same plan 3 times without a step changing\. Stop planning/);
    // Progress ends the churn.
    expect(results[3]).toMatch(/^Plan saved \(3 of 4 open\)/);
  });
});
