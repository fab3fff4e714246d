import { describe, expect, it } from "vitest";
import type { ChatMessage } from "../../src/llm/types.js";
import { Session, buildHistory } from "../../src/sessions/session.js";

const user = (content: string): ChatMessage => ({
  role: "user",
  content,
  timestamp: "2025-01-01T00:00:00.000000",
});
const assistant = (content: string): ChatMessage => ({ role: "assistant", content });
const call = (...ids: string[]): ChatMessage => ({
  role: "assistant",
  content: null,
  tool_calls: ids.map((id) => ({ id, type: "function", function: { name: "read_file", arguments: "{}" } })),
});
const result = (id: string, content = `result ${id}`): ChatMessage => ({
  role: "tool",
  tool_call_id: id,
  name: "read_file",
  content,
});

/** Contents of a history, for compact assertions. */
const contents = (msgs: ChatMessage[]): unknown[] => msgs.map((m) => m.content);

describe("Session.history", () => {
  it("returns the last maxMessages, starting at a user message", () => {
    const s = new Session("t:1", {
      messages: [user("u1"), assistant("a1"), user("u2"), assistant("a2"), user("u3"), assistant("a3")],
    });
    expect(contents(s.history(4))).toEqual(["u2", "a2", "u3", "a3"]);
    // A window of 3 opens on a2: it is skipped so the history starts with the user.
    expect(contents(s.history(3))).toEqual(["u3", "a3"]);
    expect(contents(s.history(100))).toEqual(["u1", "a1", "u2", "a2", "u3", "a3"]);
  });

  it("is empty when asked for nothing or when the window has no user message", () => {
    const s = new Session("t:1", { messages: [user("u1"), assistant("a1"), assistant("a2")] });
    expect(s.history(0)).toEqual([]);
    expect(s.history(2)).toEqual([]);
    expect(new Session("t:2").history(10)).toEqual([]);
  });

  it("excludes the consolidated part", () => {
    const s = new Session("t:1", {
      messages: [user("old"), assistant("old answer"), user("new"), assistant("new answer")],
      lastConsolidated: 2,
    });
    expect(contents(s.history(100))).toEqual(["new", "new answer"]);
    s.lastConsolidated = 4;
    expect(s.history(100)).toEqual([]);
    // A value past the end (file cut short) is treated as "everything consolidated".
    s.lastConsolidated = 99;
    expect(s.history(100)).toEqual([]);
  });

  it("keeps a complete tool call with its results, in call order", () => {
    const s = new Session("t:1", {
      messages: [user("u"), call("c1", "c2"), result("c2"), result("c1"), assistant("done")],
    });
    const h = s.history(10);
    expect(h.map((m) => m.role)).toEqual(["user", "assistant", "tool", "tool", "assistant"]);
    expect(h[1]!.tool_calls!.map((c) => c.id)).toEqual(["c1", "c2"]);
    expect(h.slice(2, 4).map((m) => m.tool_call_id)).toEqual(["c1", "c2"]);
  });

  it("drops a tool call whose results are not all there, with its partial results", () => {
    const s = new Session("t:1", {
      messages: [user("u1"), call("c1", "c2"), result("c1"), user("u2"), assistant("a2")],
    });
    const h = s.history(10);
    expect(h.map((m) => m.role)).toEqual(["user", "user", "assistant"]);
    expect(h.some((m) => m.tool_calls || m.role === "tool")).toBe(false);
  });

  it("drops a tool call whose result does not follow it directly", () => {
    // Providers want results right after the call; an interrupted turn can leave them apart.
    const s = new Session("t:1", {
      messages: [user("u1"), call("c1"), user("u2"), result("c1"), assistant("a")],
    });
    expect(contents(s.history(10))).toEqual(["u1", "u2", "a"]);
  });

  it("drops a tool result whose call is outside the window or unknown", () => {
    const s = new Session("t:1", {
      messages: [
        user("u0"),
        call("c0"),
        result("c0"),
        user("u1"),
        result("stray"), // answers no call at all
        call("c1"),
        result("c1"),
        result("c9"), // next to a call, but not one of its ids
        assistant("a1"),
      ],
    });
    const h = s.history(6);
    expect(h.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    expect(h[2]!.tool_call_id).toBe("c1");
  });

  it("drops tool results left at the start when the window cuts a turn in half", () => {
    const s = new Session("t:1", {
      messages: [user("u1"), call("c1"), result("c1"), assistant("a1"), user("u2"), assistant("a2")],
      lastConsolidated: 2,
    });
    expect(contents(s.history(10))).toEqual(["u2", "a2"]);
  });

  it("sends only role, content, tool_calls, tool_call_id and name", () => {
    const s = new Session("t:1", {
      messages: [
        user("u"),
        { ...call("c1"), reasoning_content: "thinking", timestamp: "x", tools_used: ["read_file"] },
        { ...result("c1"), timestamp: "x" },
        {
          role: "assistant",
          content: "ok",
          timestamp: "x",
          tools_used: ["read_file"],
          reasoning_content: "r",
        },
        { role: "user", timestamp: "x" } as unknown as ChatMessage, // content missing in the file
        { role: "assistant", content: "empty calls", tool_calls: [] },
      ],
    });
    const h = s.history(10);
    expect(h).toEqual([
      { role: "user", content: "u" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c1", type: "function", function: { name: "read_file", arguments: "{}" } }],
      },
      { role: "tool", content: "result c1", tool_call_id: "c1", name: "read_file" },
      { role: "assistant", content: "ok" },
      { role: "user", content: "" },
      { role: "assistant", content: "empty calls" },
    ]);
  });

  it("does not change the session's messages", () => {
    const messages = [user("u1"), call("c1"), user("u2"), assistant("a2")];
    const copy = structuredClone(messages);
    const s = new Session("t:1", { messages });
    s.history(2);
    s.history(10);
    expect(s.messages).toEqual(copy);
    expect(s.messages[0]!.timestamp).toBeDefined();
  });

  it("buildHistory is the same function over a plain array", () => {
    expect(contents(buildHistory([assistant("a"), user("u"), assistant("b")], 0, 10))).toEqual(["u", "b"]);
  });
});
