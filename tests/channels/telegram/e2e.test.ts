/**
 * The whole daemon with the real Telegram adapter: Gateway + agent + the
 * loopback fake Bot API + FakeOpenAI. A message typed "in Telegram" goes
 * through grammy, the manager's access check, the agent loop and the LLM,
 * and the reply comes back as a Bot API sendMessage.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { TelegramChannel } from "../../../src/channels/telegram/adapter.js";
import type { Gateway } from "../../../src/gateway.js";
import { lastUserText, type FakeOpenAI } from "../../fakes/openai-server.js";
import type { FakeTelegram } from "../../fakes/telegram-server.js";
import { waitFor } from "../../helpers/wait.js";
import { TelegramGatewayRig } from "./helpers.js";

let rig: TelegramGatewayRig;
let dir: string;
let llm: FakeOpenAI;
let tg: FakeTelegram;
let channel: TelegramChannel | undefined;

beforeEach(async () => {
  rig = await TelegramGatewayRig.create("palaver-tg-e2e-");
  ({ dir, llm, tg } = rig);
});

afterEach(() => rig.close());

/** `fast`: the adapter with test timings; otherwise the registry's factory as is. */
async function startGateway(
  opts: { telegram?: Record<string, unknown>; fast?: boolean; agents?: Record<string, unknown> } = {},
): Promise<Gateway> {
  const gateway = await rig.start({
    ...(opts.telegram ? { telegram: opts.telegram } : {}),
    ...(opts.agents ? { agents: opts.agents } : {}),
    ...(opts.fast ? {} : { tuning: "registry" as const }),
  });
  channel = rig.channel;
  expect(gateway.channels.status()).toEqual([{ name: "telegram", state: "running" }]);
  return gateway;
}

describe("Telegram end to end (Gateway, agent, FakeOpenAI)", () => {
  it("answers a private message with HTML in the same chat and saves the session", async () => {
    await startGateway();
    llm.setHandler((req) => ({ content: `**Echo:** ${lastUserText(req)} & more` }));
    tg.userMessage({ text: "hello <bot>" });
    const reply = await tg.waitForSent((m) => m.chatId === 42 && m.text !== undefined, 8000);
    expect(reply).toMatchObject({ parseMode: "HTML", text: "<b>Echo:</b> hello &lt;bot&gt; &amp; more" });
    expect(llm.requests).toHaveLength(1);
    const session = await readFile(join(dir, "ws", "sessions", "telegram_42.jsonl"), "utf8");
    expect(session).toContain("hello <bot>");
  });

  it("tells a refused sender its id once, and never calls the LLM for it", async () => {
    await startGateway();
    tg.userMessage({ text: "let me in", from: { id: 7, first_name: "Mallory" } });
    tg.userMessage({ text: "please", from: { id: 7, first_name: "Mallory" } });
    tg.userMessage({ text: "marker" });
    await tg.waitForSent((m) => m.chatId === 42, 8000);
    const toRefused = tg.sent.filter((m) => m.chatId === 7);
    expect(toRefused).toHaveLength(1);
    expect(toRefused[0]!.text).toContain("Your telegram user id is 7");
    expect(llm.requests).toHaveLength(1);
  });

  it("allowFrom also accepts the @username", async () => {
    await startGateway({ telegram: { allowFrom: ["@ada"] } });
    tg.userMessage({ text: "by name", from: { id: 4242, username: "ada" } });
    const reply = await tg.waitForSent((m) => m.chatId === 4242, 8000);
    expect(reply.text).toBe("ok");
  });

  it("shows typing while the LLM is slow, stops after the reply; /stop is answered at once", async () => {
    await startGateway({ fast: true });
    // The LLM answers once three typing actions went out (every 100 ms in these tests): a condition, not a clock.
    llm.setHandler(async () => {
      await tg.waitFor(() => tg.callsTo("sendChatAction").length >= 3, 30_000, "three typing actions");
      return { content: "finally" };
    });
    tg.userMessage({ text: "slow question" });
    const reply = await tg.waitForSent((m) => m.text === "finally", 30_000);
    const typing = tg.callsTo("sendChatAction");
    expect(typing.length).toBeGreaterThanOrEqual(3);
    const replyCall = tg.callsTo("sendMessage").find((c) => c.params.text === "finally")!;
    await waitFor(() => !channel!.isTyping("42"), 30_000, "typing ended with the turn");
    expect(tg.callsTo("sendChatAction").every((c) => c.at <= replyCall.at)).toBe(true);
    expect(reply.chatId).toBe(42);

    llm.setHandler(() => ({ content: "too late", delayMs: 120_000 })); // only /stop can end it
    tg.userMessage({ text: "long job" });
    await tg.waitFor(() => llm.requests.length === 2, 30_000, "the second LLM call");
    tg.userMessage({ text: "/stop" });
    const stopped = await tg.waitForSent((m) => m.text === "Stopped the running reply.", 30_000);
    expect(stopped.chatId).toBe(42);
    await waitFor(() => !channel!.isTyping("42"), 30_000, "typing ended with the stopped turn");
    expect(tg.sent.some((m) => m.text === "too late")).toBe(false);
  });

  it("keeps forum topics apart and answers in the topic", async () => {
    await startGateway({ telegram: { groupPolicy: "open" } });
    llm.setHandler((req) => ({ content: `re: ${lastUserText(req)}` }));
    const forum = { id: -1009, type: "supergroup", title: "Forum", is_forum: true };
    tg.userMessage({ chat: forum, text: "topic A", message_thread_id: 11, is_topic_message: true });
    await tg.waitForSent((m) => m.text === "re: topic A", 8000);
    tg.userMessage({ chat: forum, text: "topic B", message_thread_id: 22, is_topic_message: true });
    const b = await tg.waitForSent((m) => m.text === "re: topic B", 8000);
    const a = tg.sent.find((m) => m.text === "re: topic A")!;
    expect([a.threadId, b.threadId]).toEqual([11, 22]);
    expect(a.chatId).toBe(-1009);
    // Two sessions: topic B's LLM call does not see topic A.
    const second = JSON.stringify(llm.requests[1]!.body.messages);
    expect(second).not.toContain("topic A");
    const sessions = await readFile(join(dir, "ws", "sessions", "telegram_-1009_22.jsonl"), "utf8");
    expect(sessions).toContain("topic B");
  });

  it("answers in the General topic when the user's forum topic was deleted meanwhile", async () => {
    await startGateway({ telegram: { groupPolicy: "open" } });
    const forum = { id: -1009, type: "supergroup", title: "Forum", is_forum: true };
    // The topic is deleted while the model is still thinking about the question asked in it.
    llm.setHandler((req) => {
      tg.deleteTopic(-1009, 11);
      return { content: `re: ${lastUserText(req)}` };
    });
    tg.userMessage({ chat: forum, text: "topic A", message_thread_id: 11, is_topic_message: true });
    const reply = await tg.waitForSent((m) => m.text === "re: topic A", 8000);
    expect(reply.chatId).toBe(-1009);
    expect(reply.threadId).toBeUndefined();
    // Telegram really refused the send into the topic first: the fallback, not a lucky first send.
    const intoTopic = tg.callsTo("sendMessage").filter((c) => c.params.message_thread_id === 11);
    expect(intoTopic.length).toBeGreaterThanOrEqual(1);
    expect(tg.sent.filter((m) => m.threadId === 11)).toHaveLength(0);
    expect(tg.sent.filter((m) => m.text === "re: topic A")).toHaveLength(1);
  });

  it("keeps to the Bot API connections its turns need: twenty replies at once share six", async () => {
    // 2 × (1 turn + 1 subagent) + 2: what platformConnections allows for these settings.
    await startGateway({ agents: { maxConcurrentTurns: 1, maxSubagents: 1 } });
    const sends = Array.from({ length: 20 }, (_, i) =>
      channel!.send({ channel: "telegram", chatId: String(1000 + i), content: `note ${i}` }),
    );
    await Promise.all(sends);
    expect(tg.sent.filter((m) => m.text?.startsWith("note "))).toHaveLength(20);
    expect(tg.maxOpenConnections).toBeGreaterThan(1);
    expect(tg.maxOpenConnections).toBeLessThanOrEqual(6);
  });
});
