/**
 * Calls made with a long-lived signal (the channel's lifetime: typing, previews) must not leave a
 * listener on it each: over months that is a leak (and Node warns after 10).
 */
import { getEventListeners } from "node:events";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createPreviewApi, telegramAgent } from "../../../src/channels/telegram/api.js";
import { TelegramConfigSchema } from "../../../src/config/platforms/telegram.js";
import { DEFAULT_TUNING } from "../../../src/channels/telegram/tuning.js";
import { FakeTelegram } from "../../fakes/telegram-server.js";
import { captureLog } from "../../helpers/log.js";

let fake: FakeTelegram;
beforeEach(async () => {
  fake = await FakeTelegram.start();
});
afterEach(async () => {
  await fake.close();
});

async function previewApi(tuning = DEFAULT_TUNING, log = captureLog().log) {
  const config = TelegramConfigSchema.parse({ enabled: true, token: fake.token });
  return createPreviewApi({
    config,
    apiRoot: fake.apiRoot,
    agent: await telegramAgent(config, fake.apiRoot),
    tuning,
    log,
    onPoll: () => undefined,
  });
}

describe("Telegram calls with the channel's lifetime signal", () => {
  it("leave no listener behind on it", async () => {
    const api = await previewApi();
    const lifetime = new AbortController();
    const signal = lifetime.signal as unknown as Parameters<typeof api.sendChatAction>[3];
    for (let i = 0; i < 25; i++) await api.sendChatAction(42, "typing", {}, signal);
    expect(fake.callsTo("sendChatAction")).toHaveLength(25);
    expect(getEventListeners(lifetime.signal, "abort")).toHaveLength(0);
  });

  it("end the wait before a retry when it aborts, and leave no listener behind", async () => {
    // A wait of an hour before the retry: only the abort can end the call.
    const { log, lines } = captureLog();
    const api = await previewApi({ ...DEFAULT_TUNING, networkRetries: 1, retryBaseMs: 3_600_000 }, log);
    fake.dropNext("sendChatAction");
    const lifetime = new AbortController();
    const signal = lifetime.signal as unknown as Parameters<typeof api.sendChatAction>[3];
    const call = api.sendChatAction(42, "typing", {}, signal);
    await fake.waitFor(
      () => lines.some((l) => l.msg?.includes("retrying")),
      10_000,
      "the wait before a retry",
    );
    lifetime.abort();
    // The wait itself ended (a retry sent with the aborted signal would fail as an HttpError instead).
    await expect(call).rejects.toMatchObject({ name: "AbortError" });
    expect(fake.callsTo("sendChatAction")).toHaveLength(1);
    expect(getEventListeners(lifetime.signal, "abort")).toHaveLength(0);
  });
});
