/**
 * Calls made with a long-lived signal (the channel's lifetime: typing, previews) must not leave a
 * listener on it each: over months that is a leak (and Node warns after 10).
 */
import { getEventListeners } from "node:events";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createPreviewApi, telegramFetch } from "../../../src/channels/telegram/api.js";
import { TelegramConfigSchema } from "../../../src/channels/telegram/config.js";
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

describe("Telegram calls with the channel's lifetime signal", () => {
  it("leave no listener behind on it", async () => {
    const config = TelegramConfigSchema.parse({ enabled: true, token: fake.token });
    const api = createPreviewApi({
      config,
      apiRoot: fake.apiRoot,
      fetch: telegramFetch(config, fake.apiRoot),
      tuning: DEFAULT_TUNING,
      log: captureLog().log,
      onPoll: () => undefined,
    });
    const lifetime = new AbortController();
    const signal = lifetime.signal as unknown as Parameters<typeof api.sendChatAction>[3];
    for (let i = 0; i < 25; i++) await api.sendChatAction(42, "typing", {}, signal);
    expect(fake.callsTo("sendChatAction")).toHaveLength(25);
    expect(getEventListeners(lifetime.signal, "abort")).toHaveLength(0);
  });
});
