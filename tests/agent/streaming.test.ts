/**
 * The agent's side of streaming: with channels.streaming on, each model call is streamed and the
 * turn publishes its reply so far as "delta"s (the channel manager shows them, see
 * tests/channels/streaming.test.ts), then the final once; the session keeps only final messages.
 */
import { afterEach, describe, expect, it } from "vitest";
import { systemMessage } from "../../src/bus/types.js";
import { toolCall } from "../fakes/openai-server.js";
import { startHarness, type Harness } from "../helpers/agent-harness.js";
import { waitFor } from "../helpers/wait.js";

let h: Harness;
afterEach(async () => {
  await h.cleanup();
});

describe("streamed turns", () => {
  it("publishes the growing text as deltas of the turn, then the final once", async () => {
    h = await startHarness({ config: { channels: { streaming: true } } });
    h.fake!.enqueue({ content: "Hello there, how are you today?", pieceChars: 4 });
    const final = await h.ask("c1", "hi");
    expect(h.fake!.lastRequest!.body.stream).toBe(true);
    const deltas = h.outbound.filter((m) => m.kind === "delta");
    expect(deltas.length).toBeGreaterThan(3);
    for (const d of deltas) expect(d.turnId).toBe(final.turnId);
    for (let i = 1; i < deltas.length; i++)
      expect(deltas[i]!.content.startsWith(deltas[i - 1]!.content)).toBe(true);
    expect(deltas.at(-1)!.content).toBe("Hello there, how are you today?");
    expect(final.content).toBe("Hello there, how are you today?");
    expect(h.outbound.filter((m) => (m.kind ?? "final") === "final")).toHaveLength(1);
    const session = await h.sessions.get("test:c1");
    expect(session.messages.map((m) => m.role)).toEqual(["user", "assistant"]);
  });

  it("a reply continued after a cut-off streams as one growing text", async () => {
    h = await startHarness({ config: { channels: { streaming: true } } });
    h.fake!.enqueue(
      { content: "First part, ", finishReason: "length", pieceChars: 4 },
      { content: "second part.", pieceChars: 4 },
    );
    const final = await h.ask("c1", "write a lot");
    expect(final.content).toBe("First part, second part.");
    const deltas = h.outbound.filter((m) => m.kind === "delta").map((m) => m.content);
    for (let i = 1; i < deltas.length; i++) expect(deltas[i]!.startsWith(deltas[i - 1]!)).toBe(true);
    expect(deltas.at(-1)).toBe("First part, second part.");
  });

  it("a tool-calling turn streams its progress text, then the answer", async () => {
    h = await startHarness({ config: { channels: { streaming: true } } });
    h.fake!.enqueue(
      { content: "Let me look.", toolCalls: [toolCall("list_dir", { path: "." })] },
      { content: "Nothing much in there." },
    );
    const final = await h.ask("c1", "what is in my folder?");
    const kinds = h.outbound.filter((m) => m.turnId === final.turnId).map((m) => `${m.kind}:${m.content}`);
    expect(kinds).toContain("progress:Let me look.");
    const progressAt = kinds.indexOf("progress:Let me look.");
    expect(kinds.slice(0, progressAt).every((k) => k.startsWith("delta:Let"))).toBe(true);
    expect(kinds.slice(progressAt + 1).some((k) => k.startsWith("delta:Nothing"))).toBe(true);
    expect(kinds.at(-1)).toBe("final:Nothing much in there.");
  });

  it("background work is not streamed (a heartbeat's nothing-to-report must never show)", async () => {
    h = await startHarness({ config: { channels: { streaming: true } } });
    h.fake!.enqueue({ content: "Reminder: water the plants." });
    h.bus.publishInbound(
      systemMessage({ senderId: "cron", content: "remind me", origin: { channel: "test", chatId: "c2" } }),
    );
    await waitFor(() => h.outbound.some((m) => (m.kind ?? "final") === "final"), undefined, "the reminder");
    expect(h.outbound.filter((m) => m.kind === "delta")).toEqual([]);
    expect(h.fake!.lastRequest!.body.stream).toBeUndefined();
  });

  it("with streaming off nothing streams", async () => {
    h = await startHarness();
    h.fake!.enqueue({ content: "plain" });
    await h.ask("c1", "hi");
    expect(h.fake!.lastRequest!.body.stream).toBeUndefined();
    expect(h.outbound.filter((m) => m.kind === "delta")).toEqual([]);
  });
});
