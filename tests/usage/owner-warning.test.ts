/**
 * The budget warning reaches owners who have not written since the gateway started: a Telegram
 * owner named by user id gets it in their private chat at once, an owner named by @username (no
 * chat known) the first time they write, even after a restart. Each exactly once. The real
 * `palaver gateway` child against the Telegram fake.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { lastUserText } from "../fakes/openai-server.js";
import { GatewayHarness, writeGatewayConfig } from "../helpers/gateway-process.js";

const harness = new GatewayHarness({ prefix: "palaver-owner-warning-" });
beforeEach(() => harness.start());
afterEach(() => harness.close());

/** The writer (42) and `others` as owners; each call $0.001 against a $0.0025 monthly budget, warned at 60 %. */
async function configure(others: string[]): Promise<void> {
  harness.llm.setHandler((req) => ({
    content: `re: ${lastUserText(req)}`,
    usage: { prompt_tokens: 1000, completion_tokens: 0 },
  }));
  harness.configPath = await writeGatewayConfig(
    harness.dir,
    { llmBaseURL: harness.llm.baseURL, telegram: harness.tg },
    {
      channels: { telegram: { allowFrom: ["42", ...others] } },
      pricing: { "fake-*": { input: 1, output: 0 } },
      budget: { monthlyUsd: 0.0025, warnAt: 0.6 },
    },
  );
}

/** `from` writes `text` in their private chat and gets the answer. */
async function turn(text: string, from: { id: number; username?: string } = { id: 42 }): Promise<void> {
  harness.tg.userMessage({ text, from, chat: { id: from.id, type: "private" } });
  await harness.tg.waitForSent(
    (m) => m.text === `re: ${text}` && String(m.chatId) === String(from.id),
    20_000,
  );
}

const warningsTo = (chatId: number) =>
  harness.tg.sent.filter((m) => String(m.chatId) === String(chatId) && m.text?.startsWith("Budget:"));

describe("budget warning to owners who never wrote", { timeout: 120_000 }, () => {
  it("reaches a Telegram owner by user id in their private chat, once", async () => {
    await configure(["77"]);
    await harness.startGateway();
    await turn("one");
    await turn("two"); // $0.002: 80 %, over the warning level
    await harness.tg.waitForSent(
      (m) => String(m.chatId) === "77" && m.text?.startsWith("Budget:") === true,
      20_000,
    );
    expect(warningsTo(77)[0]!.text).toContain("of the monthly budget of $0.0025 is spent");
    // Later turns (over the limit now) are answered; the warning is not repeated anywhere.
    await turn("three");
    await turn("four");
    expect(warningsTo(77)).toHaveLength(1);
    expect(warningsTo(42)).toHaveLength(1);
  });

  it("keeps it for an owner named by @username until they write, across a restart, once", async () => {
    await configure(["@bob"]);
    const first = await harness.startGateway();
    await turn("one");
    await turn("two");
    await harness.tg.waitForSent(
      (m) => String(m.chatId) === "42" && m.text?.startsWith("Budget:") === true,
      20_000,
    );
    await harness.kill(first);
    expect(warningsTo(99)).toHaveLength(0);

    await harness.startGateway();
    const bob = { id: 99, username: "bob" };
    await turn("hello", bob);
    await harness.tg.waitForSent(
      (m) => String(m.chatId) === "99" && m.text?.startsWith("Budget:") === true,
      20_000,
    );
    expect(warningsTo(99)[0]!.text).toContain("of the monthly budget of $0.0025 is spent");
    await turn("again", bob);
    expect(warningsTo(99)).toHaveLength(1);
    expect(warningsTo(42)).toHaveLength(1);
  });
});
