/**
 * Issue 11: secrets never reach the logs. These tests log through the real
 * root logger (src/log.ts, redaction included) into an array, and drive the
 * real SDKs: grammy against the fake Bot API made to fail, the openai SDK
 * against the fake OpenAI server answering with the key echoed back.
 */
import { Bot, HttpError } from "grammy";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { configureLogging, logger, redact, redactText, registerSecrets } from "../src/log.js";
import { MessageBus } from "../src/bus/bus.js";
import { ChannelManager } from "../src/channels/manager.js";
import { describeTelegramError } from "../src/channels/telegram/adapter.js";
import type { Channel } from "../src/channels/types.js";
import { ChannelError } from "../src/util/errors.js";
import { FakeTelegram } from "./fakes/telegram-server.js";
import { startHarness } from "./helpers/agent-harness.js";
import { waitFor } from "./helpers/wait.js";
import { rig } from "./channels/telegram/helpers.js";

type Line = Record<string, unknown> & { msg?: string };
const written: string[] = [];
const lines = (): Line[] => written.map((l) => JSON.parse(l) as Line);

const savedLevel = process.env.PALAVER_LOG_LEVEL;
beforeAll(() => {
  // vitest.config sets PALAVER_LOG_LEVEL=silent, which would win over the level given here.
  process.env.PALAVER_LOG_LEVEL = "debug";
  configureLogging({ destination: { write: (s: string) => void written.push(s) } });
});
afterAll(() => {
  if (savedLevel === undefined) delete process.env.PALAVER_LOG_LEVEL;
  else process.env.PALAVER_LOG_LEVEL = savedLevel;
  configureLogging({});
});
beforeEach(() => {
  written.length = 0;
});

// Short and unregistered: only the Bot API URL shape can give it away.
const SHORT_TOKEN = "4242:short_Tok-en";

describe("redaction rules", () => {
  it("masks URL credentials, the token in a Bot API path, and registered values", () => {
    registerSecrets(["my-registered-secret"]);
    expect(redactText("proxy http://bob:hunter22@proxy:3128 failed")).toBe(
      "proxy http://bob:[redacted]@proxy:3128 failed",
    );
    expect(redactText(`request to http://127.0.0.1:1/bot${SHORT_TOKEN}/getMe failed`)).toBe(
      "request to http://127.0.0.1:1/bot[redacted]/getMe failed",
    );
    expect(redactText("key my-registered-secret!")).toBe("key [redacted]!");
  });

  it("serializes and redacts errors under any key and at any depth", () => {
    const inner = new Error(`request to http://x/bot${SHORT_TOKEN}/getMe failed`);
    const out = JSON.stringify(
      redact({ nested: { error: inner }, list: [new Error("http://u:pw123456@h")] }),
    );
    expect(out).not.toContain(SHORT_TOKEN);
    expect(out).not.toContain("pw123456");
    expect(out).toContain("bot[redacted]/getMe");
    // Environments and headers: every value is a secret, whatever its name.
    const logged = JSON.stringify(
      redact({ server: { env: { GH_PAT: "ghp_value_1", MODE: "x" }, headers: { "X-Key": "hdr-value-2" } } }),
    );
    expect(logged).not.toContain("ghp_value_1");
    expect(logged).not.toContain("hdr-value-2");
    expect(logged).toContain('"GH_PAT":"[redacted]"');
    let deep: Record<string, unknown> = { secret: `http://a:deep-pass@h` };
    for (let i = 0; i < 20; i++) deep = { deep };
    expect(JSON.stringify(redact(deep))).not.toContain("deep-pass");
  });
});

describe("grammy HttpError", () => {
  it("a failed Bot API call logged as err, as a nested field or in the message shows no token", async () => {
    const fake = await FakeTelegram.start({ token: SHORT_TOKEN });
    try {
      const bot = new Bot(fake.token, { client: { apiRoot: fake.apiRoot } });
      fake.dropNext("getMe");
      const err = await bot.api.getMe().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(HttpError);
      // The SDK's error really carries the token (node-fetch puts the URL in its message).
      expect(String((err as HttpError).error)).toContain(`/bot${SHORT_TOKEN}/getMe`);

      const log = logger("telegram");
      log.error({ err }, "getMe failed");
      log.warn({ details: { error: err } }, "nested");
      log.warn(`getMe failed: ${String((err as HttpError).error)}`);
      expect(written).toHaveLength(3);
      const text = written.join("\n");
      expect(text).not.toContain(SHORT_TOKEN);
      expect(text).toContain("/bot[redacted]/getMe");
      const first = lines()[0]!;
      expect((first.err as { type: string }).type).toBe("HttpError");
    } finally {
      await fake.close();
    }
  });

  it("the Telegram channel's own log of a network failure shows no token", async () => {
    const fake = await FakeTelegram.start({ token: SHORT_TOKEN });
    // More drops than the channel retries: setMyCommands fails and is logged as a warning.
    fake.dropNext("setMyCommands", 10);
    const r = await rig({ fake, log: logger("telegram") });
    try {
      await r.start();
      await waitFor(() => lines().some((l) => /command menu/.test(l.msg ?? "")), 10_000, "the warning");
      const warning = lines().find((l) => /command menu/.test(l.msg ?? ""))!;
      // The channel's calls go through pooledFetch, whose errors do not quote the URL (node-fetch's do).
      expect(JSON.stringify(warning)).toContain("Network request for 'setMyCommands' failed");
      expect(written.join("\n")).not.toContain(SHORT_TOKEN);
    } finally {
      await r.cleanup();
    }
  });
});

describe("channel errors shown by /healthz and /status", () => {
  it("a channel that cannot reach the Bot API reports its error without the token", async () => {
    const fake = await FakeTelegram.start({ token: SHORT_TOKEN });
    fake.dropNext("getMe", 1000);
    const bot = new Bot(fake.token, { client: { apiRoot: fake.apiRoot } });
    // Fails the way TelegramChannel.start does: the real grammy HttpError, described for the operator.
    const channel: Channel = {
      name: "telegram",
      async start() {
        try {
          await bot.api.getMe();
        } catch (err) {
          throw new ChannelError(describeTelegramError(err, fake.apiRoot), { cause: err });
        }
      },
      async stop() {},
      async send() {},
    };
    const manager = new ChannelManager({
      bus: new MessageBus(),
      sendProgress: false,
      sendToolHints: false,
      retryBaseMs: 60_000,
      retryMaxMs: 60_000,
    });
    manager.add(channel, { allowFrom: ["42"] });
    try {
      await manager.start();
      await waitFor(() => manager.status()[0]?.lastError !== undefined, 10_000, "the start failure");
      const { lastError } = manager.status()[0]!;
      // The operator still learns what failed, and where.
      expect(lastError).toContain("cannot reach the Telegram Bot API");
      expect(lastError).toContain(`at ${fake.apiRoot} (`);
      expect(lastError).not.toContain(SHORT_TOKEN);
      expect(written.join("\n")).not.toContain(SHORT_TOKEN);
    } finally {
      await manager.stop();
      await fake.close();
    }
  });
});

describe("an LLM error echoing the key", () => {
  it("is redacted in the logs and in the reply the user gets", async () => {
    const h = await startHarness();
    try {
      const key = h.config.providers.custom!.apiKey;
      const echo = (status: number) => ({
        status,
        errorBody: { error: { message: `Incorrect API key provided: ${key}.`, type: "x", code: "x" } },
      });
      h.fake!.enqueue(echo(401));
      const auth = await h.ask("c1", "hello");
      expect(auth.content).toContain("rejected the API key");
      // A 400 shows the server's reason to the user: the key must not be in it.
      h.fake!.enqueue(echo(400));
      const refused = await h.ask("c2", "hello again");
      expect(refused.content).toContain("Incorrect API key provided: [redacted]");
      await waitFor(() => written.length > 0, 5000, "a log line about the failures");
      for (const text of [auth.content, refused.content, written.join("\n")]) expect(text).not.toContain(key);
      expect(written.join("\n")).toContain("Incorrect API key provided: [redacted]");
    } finally {
      await h.cleanup();
    }
  });
});
