/**
 * "typing…" under a queue: with one turn at a time and many chats waiting,
 * only the chat whose turn runs gets sendChatAction (refreshed per interval),
 * and each queued chat gets its first one when its own turn starts. The whole
 * daemon (Gateway, agent, real grammy) against FakeTelegram and FakeOpenAI.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { lastUserText, type FakeOpenAI } from "../../fakes/openai-server.js";
import type { FakeTelegram } from "../../fakes/telegram-server.js";
import { createGate } from "../../helpers/gate.js";
import { TelegramGatewayRig } from "./helpers.js";

const CHATS = 8;

let rig: TelegramGatewayRig;
let llm: FakeOpenAI;
let tg: FakeTelegram;

beforeEach(async () => {
  rig = await TelegramGatewayRig.create("palaver-tg-typing-queue-");
  ({ llm, tg } = rig);
});

afterEach(() => rig.close());

const typingIn = (chatId: number) =>
  tg.callsTo("sendChatAction").filter((c) => c.params.chat_id === chatId).length;

describe("Telegram typing with messages queued", () => {
  it("types only in the chat whose turn runs; a queued chat starts typing with its turn", async () => {
    const first = createGate();
    llm.setHandler(async (req) => {
      const text = lastUserText(req);
      if (text === "from 1") await first.opened;
      return { content: `re: ${text}` };
    });
    await rig.start({
      agents: { maxConcurrentTurns: 1 },
      channels: { streaming: false },
      telegram: { allowFrom: ["*"] },
    });

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
