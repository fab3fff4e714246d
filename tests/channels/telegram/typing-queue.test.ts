/**
 * "typing…" under a queue: with one turn at a time and many chats waiting,
 * only the chat whose turn runs gets sendChatAction (refreshed per interval),
 * and each queued chat gets its first one when its own turn starts. The whole
 * daemon (Gateway, agent, real grammy) against FakeTelegram and FakeOpenAI.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTelegramChannel } from "../../../src/channels/telegram/adapter.js";
import { ConfigSchema } from "../../../src/config/schema.js";
import { Gateway } from "../../../src/gateway.js";
import { createProvider } from "../../../src/llm/openai-provider.js";
import { FakeOpenAI, lastUserText } from "../../fakes/openai-server.js";
import { FakeTelegram } from "../../fakes/telegram-server.js";
import { createGate } from "../../helpers/gate.js";
import { FAST } from "./helpers.js";

const CHATS = 8;

let dir: string;
let llm: FakeOpenAI;
let tg: FakeTelegram;
let gateway: Gateway | undefined;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-tg-typing-queue-"));
  llm = await FakeOpenAI.start();
  tg = await FakeTelegram.start();
});

afterEach(async () => {
  await gateway?.stop(500);
  gateway = undefined;
  await tg.close();
  await llm.close();
  await rm(dir, { recursive: true, force: true });
});

const typingIn = (chatId: number) =>
  tg.callsTo("sendChatAction").filter((c) => c.params.chat_id === chatId).length;

describe("Telegram typing with messages queued", () => {
  it("types only in the chat whose turn runs; a queued chat starts typing with its turn", async () => {
    const config = ConfigSchema.parse({
      agents: {
        defaults: {
          workspace: join(dir, "ws"),
          provider: "custom",
          model: "fake-model",
          maxConcurrentTurns: 1,
        },
      },
      providers: { custom: { apiKey: "k", apiBase: llm.baseURL } },
      channels: {
        sendProgress: false,
        streaming: false,
        telegram: { enabled: true, token: tg.token, apiRoot: tg.apiRoot, allowFrom: ["*"], pollTimeout: 1 },
      },
      gateway: { heartbeat: { enabled: false } },
    });
    const first = createGate();
    llm.setHandler(async (req) => {
      const text = lastUserText(req);
      if (text === "from 1") await first.opened;
      return { content: `re: ${text}` };
    });
    gateway = new Gateway({
      loaded: { config, workspace: join(dir, "ws"), path: join(dir, "config.json") },
      provider: createProvider(config),
      platforms: { telegram: (ctx) => createTelegramChannel(ctx, FAST) },
    });
    await gateway.start();

    tg.userMessage({ text: "from 1", from: { id: 1, first_name: "u1" }, chat: { id: 1, type: "private" } });
    await tg.waitFor(() => llm.requests.length === 1, 10_000, "the first turn's LLM call");
    for (let i = 2; i <= CHATS; i++) {
      tg.userMessage({
        text: `from ${i}`,
        from: { id: i, first_name: `u${i}` },
        chat: { id: i, type: "private" },
      });
    }
    // The running turn keeps typing (refreshed every interval) while the others wait in the queue.
    await tg.waitFor(() => tg.pendingUpdates === 0, 10_000, "the queued messages taken");
    const before = typingIn(1);
    await tg.waitFor(() => typingIn(1) >= before + 2, 10_000, "typing refreshed in chat 1");
    for (let i = 2; i <= CHATS; i++) expect(typingIn(i), `chat ${i} waits in the queue`).toBe(0);

    first.open();
    await tg.waitFor(
      () => tg.sent.filter((m) => m.text?.startsWith("re: ")).length === CHATS,
      15_000,
      "replies",
    );
    for (let i = 2; i <= CHATS; i++) expect(typingIn(i), `chat ${i}`).toBeGreaterThanOrEqual(1);
  });
});
