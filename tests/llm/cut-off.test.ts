import { afterEach, describe, expect, it } from "vitest";
import { toolCall } from "../fakes/openai-server.js";
import { startHarness, type Harness } from "../helpers/agent-harness.js";

describe('finish_reason "length" through the agent', () => {
  let h: Harness;
  afterEach(async () => {
    await h.cleanup();
  });

  it("marks a cut-off answer as cut off for the user (with continuations off)", async () => {
    h = await startHarness({ config: { agents: { defaults: { maxContinuations: 0 } } } });
    h.fake!.enqueue({ content: "The three reasons are: first, the", finishReason: "length" });
    const reply = await h.ask("chat", "why?");
    expect(reply.content).toMatch(/^The three reasons are: first, the\n\n\(Cut off: /);
    expect(reply.content).toContain("output token limit");
  });

  it("says so when the limit was reached before any text (a reasoning model spent it all)", async () => {
    h = await startHarness();
    h.fake!.enqueue({ content: "", reasoning: "long thoughts", finishReason: "length" });
    const reply = await h.ask("chat", "why?");
    expect(reply.content).toMatch(/^\(No answer: the model reached its output token limit/);
  });

  it("cut-off tool arguments make the model retry with smaller output", async () => {
    h = await startHarness();
    h.fake!.enqueue(
      {
        toolCalls: [toolCall("write_file", '{"path": "notes.md", "content": "a very long tex')],
        finishReason: "length",
      },
      { content: "done in parts" },
    );
    const reply = await h.ask("chat", "write the notes");
    expect(reply.content).toBe("done in parts");
    const toolMessage = h.fake!.requests[1]!.body.messages.find((m) => m.role === "tool");
    expect(toolMessage?.content).toMatch(/reached the token limit while writing the arguments of write_file/);
    expect(toolMessage?.content).toContain("Retry with smaller output");
  });

  it("an answer that ended normally is left alone", async () => {
    h = await startHarness();
    h.fake!.enqueue({ content: "All done." });
    expect((await h.ask("chat", "hi")).content).toBe("All done.");
  });
});
