/**
 * A real TelegramChannel (real grammy) against the loopback FakeTelegram, with fast timings (`rig`),
 * or a whole Gateway around it with the model behind FakeOpenAI (`TelegramGatewayRig`).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Logger } from "../../../src/log.js";
import type { InboundMessage } from "../../../src/bus/types.js";
import {
  createTelegramChannel,
  TelegramChannel,
  type TelegramTuning,
} from "../../../src/channels/telegram/adapter.js";
import { telegramAgent } from "../../../src/channels/telegram/api.js";
import { TelegramConfigSchema } from "../../../src/config/platforms/telegram.js";
import { isAllowed } from "../../../src/channels/access.js";
import type { IngressLease } from "../../../src/channels/ingress-lease.js";
import type { Transcriber } from "../../../src/channels/transcription.js";
import { ConfigSchema } from "../../../src/config/schema.js";
import { Gateway } from "../../../src/gateway.js";
import { createProvider } from "../../../src/llm/openai-provider.js";
import { FakeOpenAI } from "../../fakes/openai-server.js";
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
    /** Cluster mode: polls only while holding it. */
    lease?: IngressLease;
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
      ...(opts.lease ? { lease: opts.lease } : {}),
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

/** What a test changes of the in-process gateway's config (each merged over the defaults below). */
export interface GatewayRigOptions {
  /** channels.telegram keys (default: allowFrom ["42"], pollTimeout 1). */
  telegram?: Record<string, unknown>;
  /** Other channels keys (default: sendProgress false). */
  channels?: Record<string, unknown>;
  /** agents.defaults keys. */
  agents?: Record<string, unknown>;
  /** The adapter's timings: FAST (default), or "registry" for the registry's factory as is. */
  tuning?: Partial<TelegramTuning> | "registry";
  log?: Logger;
}

/**
 * A Gateway in this process (agent, channel manager, journal) with the real Telegram adapter
 * against FakeTelegram and the model behind FakeOpenAI, in a temp folder: `create` in beforeEach,
 * `start` in the test, `close` in afterEach.
 */
export class TelegramGatewayRig {
  gateway: Gateway | undefined;
  /** The adapter the gateway runs, once started. */
  channel: TelegramChannel | undefined;

  private constructor(
    readonly dir: string,
    readonly tg: FakeTelegram,
    readonly llm: FakeOpenAI,
  ) {}

  static async create(prefix: string): Promise<TelegramGatewayRig> {
    const dir = await mkdtemp(join(tmpdir(), prefix));
    return new TelegramGatewayRig(dir, await FakeTelegram.start(), await FakeOpenAI.start());
  }

  get workspace(): string {
    return join(this.dir, "ws");
  }

  get configPath(): string {
    return join(this.dir, "config.json");
  }

  async start(opts: GatewayRigOptions = {}): Promise<Gateway> {
    const { tg, llm } = this;
    const config = ConfigSchema.parse({
      agents: {
        defaults: { workspace: this.workspace, provider: "custom", model: "fake-model", ...opts.agents },
      },
      providers: { custom: { apiKey: "k", apiBase: llm.baseURL } },
      channels: {
        sendProgress: false,
        ...opts.channels,
        telegram: {
          enabled: true,
          token: tg.token,
          apiRoot: tg.apiRoot,
          allowFrom: ["42"],
          pollTimeout: 1,
          ...opts.telegram,
        },
      },
      gateway: { heartbeat: { enabled: false }, port: 0 },
    });
    const tuning = opts.tuning === "registry" ? undefined : { ...FAST, ...opts.tuning };
    this.gateway = new Gateway({
      loaded: { config, workspace: this.workspace, path: this.configPath },
      provider: createProvider(config),
      platforms: { telegram: async (ctx) => (this.channel = await createTelegramChannel(ctx, tuning)) },
      ...(opts.log ? { log: opts.log } : {}),
    });
    await this.gateway.start();
    return this.gateway;
  }

  async close(): Promise<void> {
    await this.gateway?.stop(500);
    this.gateway = undefined;
    await this.tg.close();
    await this.llm.close();
    await rm(this.dir, { recursive: true, force: true });
  }
}
