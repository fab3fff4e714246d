/**
 * The message tool and the cron tool as the assembled agent wires them
 * (createAgent): the model's calls go through the real loop and registry.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { toolCall } from "../../fakes/openai-server.js";
import { startHarness, type Harness } from "../../helpers/agent-harness.js";

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.cleanup();
  harness = undefined;
});

/** The tool results the model saw in its last request. */
function toolResults(h: Harness): string[] {
  const messages = h.fake!.requests.at(-1)!.body.messages as { role: string; content: string }[];
  return messages.filter((m) => m.role === "tool").map((m) => m.content);
}

describe("message tool in the agent", () => {
  it("refuses a chat that never talked to the bot and the state folder's files; answers the own chat", async () => {
    harness = await startHarness();
    // The harness keeps its state folder (cron store) inside the workspace, at <workspace>/state.
    await mkdir(join(harness.workspace, "state"), { recursive: true });
    await writeFile(join(harness.workspace, "state", "config.json"), "{}");
    harness.fake!.enqueue(
      {
        toolCalls: [
          toolCall("message", { content: "psst", channel: "test", chat_id: "stranger" }),
          toolCall("message", { content: "keys", media: ["state/config.json"] }),
        ],
      },
      { content: "done" },
    );
    const reply = await harness.ask("c1", "do it");
    expect(reply.content).toBe("done");
    const [toStranger, secret] = toolResults(harness);
    expect(toStranger).toMatch(/cannot send to test:stranger: palaver has no channel named "test"/);
    expect(secret).toMatch(/access denied: state\/config\.json is one of palaver's own files/);
    expect(harness.outbound.filter((m) => m.chatId === "stranger" || m.media?.length)).toEqual([]);
  });

  it("writes to a chat that has a session", async () => {
    harness = await startHarness();
    harness.fake!.enqueue({ content: "hello from c2" });
    await harness.ask("c2", "hi");
    harness.fake!.enqueue(
      { toolCalls: [toolCall("message", { content: "note for c2", chat_id: "c2" })] },
      { content: "sent" },
    );
    await harness.ask("c1", "tell c2");
    expect(harness.outbound.find((m) => m.content === "note for c2")).toMatchObject({ chatId: "c2" });
  });
});

describe("cron tool in the agent", () => {
  it("records the sender of the turn as the job's creator", async () => {
    harness = await startHarness();
    harness.fake!.enqueue(
      { toolCalls: [toolCall("cron", { action: "add", message: "water", every_seconds: 600 })] },
      { content: "scheduled" },
    );
    // A configured platform: since issue 12 the tool refuses a channel the config does not know ("test").
    await harness.ask("c1", "remind me", {
      channel: "telegram",
      senderId: "u-42",
      senderAliases: ["ada"],
    });
    const [job] = await harness.cron.list();
    expect(job!.payload.creator).toEqual({
      kind: "sender",
      channel: "telegram",
      senderId: "u-42",
      aliases: ["ada"],
    });
  });
});
