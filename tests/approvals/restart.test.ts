/**
 * Approval prompts across gateway restarts, in process: a loopback channel with buttons in place of
 * Telegram, the real openai SDK against FakeOpenAI, the real journal and question desk.
 */
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { InboundMessage, OutboundMessage } from "../../src/bus/types.js";
import type { Channel, ChoiceClick, InboundSink, SentMessage } from "../../src/channels/types.js";
import { openQuestionsPath } from "../../src/config/paths.js";
import { ConfigSchema } from "../../src/config/schema.js";
import { Gateway } from "../../src/gateway.js";
import { createProvider } from "../../src/llm/openai-provider.js";
import { FakeOpenAI, toolCall } from "../fakes/openai-server.js";
import { waitFor } from "../helpers/wait.js";

/** Telegram's stand-in: questions get a message ref, presses go to the sink. */
class ButtonChannel implements Channel {
  readonly name = "telegram";
  readonly sent: OutboundMessage[] = [];
  private sink: InboundSink | undefined;
  start(sink: InboundSink): Promise<void> {
    this.sink = sink;
    return Promise.resolve();
  }
  stop(): Promise<void> {
    return Promise.resolve();
  }
  send(msg: OutboundMessage): Promise<SentMessage | void> {
    this.sent.push(msg);
    return Promise.resolve(msg.kind === "question" ? { ref: `ref-${this.sent.length}` } : undefined);
  }
  receive(msg: Partial<InboundMessage> & { content: string }): void {
    this.sink!.publishInbound({ channel: "telegram", senderId: "42", chatId: "chat-1", ...msg });
  }
  press(click: Omit<ChoiceClick, "channel" | "chatId">) {
    return this.sink!.choose!({ channel: "telegram", chatId: "chat-1", ...click });
  }
  of(kind: OutboundMessage["kind"]): OutboundMessage[] {
    return this.sent.filter((m) => m.kind === kind);
  }
}

let dir: string;
let fake: FakeOpenAI;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-approvals-restart-"));
  fake = await FakeOpenAI.start();
});
afterEach(async () => {
  await fake.close();
  await rm(dir, { recursive: true, force: true });
});

function gatewayWith(channel: ButtonChannel): Gateway {
  const config = ConfigSchema.parse({
    agents: { defaults: { workspace: join(dir, "ws"), provider: "custom", model: "fake-model" } },
    providers: { custom: { apiKey: "k", apiBase: fake.baseURL } },
    channels: { telegram: { enabled: true, allowFrom: ["42"] } },
    gateway: { heartbeat: { enabled: false }, port: 0 },
    tools: { approval: { mode: "risky" }, exec: { sandbox: "off" } },
  });
  return new Gateway({
    loaded: { config, workspace: join(dir, "ws"), path: join(dir, "config.json") },
    provider: createProvider(config),
    platforms: { telegram: () => Promise.resolve(channel) },
  });
}

describe("approval prompts and restarts", { timeout: 60_000 }, () => {
  it("stopped while a prompt waits: it says expired and the tool never ran; the replayed turn asks again", async () => {
    // Not read-only, so any approval policy asks for it.
    const command = "touch made-by-approval";
    fake.setHandler((req) =>
      req.body.messages.some((m) => m.role === "tool")
        ? { content: "Made it." }
        : { toolCalls: [toolCall("exec", { command })] },
    );
    const before = new ButtonChannel();
    const first = gatewayWith(before);
    await first.start();
    before.receive({ content: "make the file", messageId: "7" });
    await waitFor(() => before.of("question").length === 1, undefined, "the prompt");
    await first.stop(0);
    expect(before.of("edit")).toMatchObject([
      { content: expect.stringMatching(/^⌛ Expired \(palaver stopped\): .* was not run\.$/) as unknown },
    ]);
    expect(before.of("edit")[0]!.edit).toEqual({
      questionId: before.of("question")[0]!.question!.id,
      ref: "ref-1",
    });
    expect(existsSync(join(dir, "ws", "made-by-approval"))).toBe(false);

    const after = new ButtonChannel();
    const second = gatewayWith(after);
    await second.start();
    try {
      await waitFor(() => after.of("question").length === 1, undefined, "the prompt asked again");
      const questionId = after.of("question")[0]!.question!.id;
      expect(after.press({ senderId: "42", questionId, choiceId: "approve" }).accepted).toBe(true);
      await waitFor(() => after.sent.some((m) => m.content === "Made it."), undefined, "the reply");
      expect(existsSync(join(dir, "ws", "made-by-approval"))).toBe(true);
      const metrics = await second.metrics.text();
      expect(metrics).toContain('palaver_approvals_total{decision="approved"} 1');
      expect(metrics).toContain('palaver_approval_wait_seconds_count{decision="approved"} 1');
    } finally {
      await second.stop(1000);
    }
  });

  it("a prompt left open by a crash is edited to expired at the next start, with its saved ref", async () => {
    const path = openQuestionsPath(join(dir, "config.json"));
    await mkdir(join(path, ".."), { recursive: true });
    const saved = {
      id: "abc123",
      kind: "approval",
      channel: "telegram",
      chatId: "chat-1",
      summary: "Run the shell command: `rm -rf build`",
      ref: "555",
    };
    await writeFile(path, JSON.stringify({ version: 1, open: [saved] }));
    const channel = new ButtonChannel();
    const gateway = gatewayWith(channel);
    await gateway.start();
    try {
      await waitFor(() => channel.of("edit").length === 1, undefined, "the expired edit");
      expect(channel.of("edit")[0]).toMatchObject({
        chatId: "chat-1",
        content: "⌛ Expired (palaver restarted): Run the shell command: `rm -rf build` was not run.",
        edit: { questionId: "abc123", ref: "555" },
      });
    } finally {
      await gateway.stop(1000);
    }
  });
});
