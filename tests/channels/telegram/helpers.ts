/** A real TelegramChannel (real grammy) against the loopback FakeTelegram, with fast timings. */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Logger } from "../../../src/log.js";
import type { InboundMessage } from "../../../src/bus/types.js";
import { TelegramChannel, type TelegramTuning } from "../../../src/channels/telegram/adapter.js";
import { telegramAgent } from "../../../src/channels/telegram/api.js";
import { TelegramConfigSchema } from "../../../src/config/platforms/telegram.js";
import { isAllowed } from "../../../src/channels/access.js";
import type { Transcriber } from "../../../src/channels/transcription.js";
import { FakeTelegram } from "../../fakes/telegram-server.js";

export const FAST: Partial<TelegramTuning> = {
  typingIntervalMs: 100,
  albumDelayMs: 150,
  startTimeoutMs: 30_000, // only ends a hung test (loaded machines)
  stopTimeoutMs: 2000,
  retryBaseMs: 50,
  retryMaxMs: 200,
};

export interface Rig {
  fake: FakeTelegram;
  channel: TelegramChannel;
  workspace: string;
  inbound: InboundMessage[];
  /** Messages the sink's `allows` refused, handed to its `refuse`. */
  refused: InboundMessage[];
  /** Resolves with the n-th (1-based) inbound message once it arrived. */
  nthInbound: (n: number, timeoutMs?: number) => Promise<InboundMessage>;
  start: () => Promise<void>;
  cleanup: () => Promise<void>;
}

export async function rig(
  opts: {
    config?: Record<string, unknown>;
    tuning?: Partial<TelegramTuning>;
    maxMediaBytes?: number;
    transcriber?: Transcriber | null;
    fake?: FakeTelegram;
    log?: Logger;
  } = {},
): Promise<Rig> {
  const fake = opts.fake ?? (await FakeTelegram.start());
  const workspace = await mkdtemp(join(tmpdir(), "palaver-tg-"));
  let channel: TelegramChannel;
  let allowFrom: readonly string[] = [];
  try {
    const config = TelegramConfigSchema.parse({
      enabled: true,
      token: fake.token,
      apiRoot: fake.apiRoot,
      allowFrom: ["42"],
      pollTimeout: 1,
      ...opts.config,
    });
    allowFrom = config.allowFrom;
    channel = new TelegramChannel({
      config,
      workspace,
      maxMediaBytes: opts.maxMediaBytes ?? 1024 * 1024,
      transcriber: opts.transcriber ?? null,
      tuning: { ...FAST, ...opts.tuning },
      agent: await telegramAgent(config, config.apiRoot),
      ...(opts.log ? { log: opts.log } : {}),
    });
  } catch (err) {
    // A bad config is refused; nothing may be left behind.
    await fake.close();
    await rm(workspace, { recursive: true, force: true });
    throw err;
  }
  const inbound: InboundMessage[] = [];
  const refused: InboundMessage[] = [];
  const lifetime = new AbortController();
  return {
    fake,
    channel,
    workspace,
    inbound,
    refused,
    nthInbound: (n, timeoutMs = 5000) =>
      fake.waitFor(() => inbound[n - 1], timeoutMs, `inbound message #${n}`),
    start: () =>
      channel.start(
        {
          allows: (m) => isAllowed(m, allowFrom),
          publishInbound: (m) => inbound.push(m),
          refuse: (m) => refused.push(m),
        },
        lifetime.signal,
      ),
    async cleanup() {
      lifetime.abort();
      await channel.stop();
      await fake.close();
      await rm(workspace, { recursive: true, force: true });
    },
  };
}
