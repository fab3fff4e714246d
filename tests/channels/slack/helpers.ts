/**
 * The real Slack adapter against the fake Slack, with a sink that records what it publishes
 * (`slackRig`), or a whole Gateway around it with the model behind FakeOpenAI (`SlackGatewayRig`).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino, type Logger } from "pino";
import type { InboundMessage, TurnEvent } from "../../../src/bus/types.js";
import { isAllowed } from "../../../src/channels/access.js";
import { createSlackChannel, SlackChannel, type SlackTuning } from "../../../src/channels/slack/adapter.js";
import type { InboundSink } from "../../../src/channels/types.js";
import type { Transcriber } from "../../../src/channels/transcription.js";
import { SlackConfigSchema } from "../../../src/config/platforms/slack.js";
import { ConfigSchema } from "../../../src/config/schema.js";
import { Gateway } from "../../../src/gateway.js";
import { createProvider } from "../../../src/llm/openai-provider.js";
import { FakeOpenAI } from "../../fakes/openai-server.js";
import { FakeSlack } from "../../fakes/slack-server.js";

/** Fast enough for tests: reconnects after ~150 ms, Web API retries after ~10 ms. */
export const FAST: SlackTuning = {
  clientPingTimeoutMs: 150,
  serverPingTimeoutMs: 30_000,
  retryConfig: { retries: 2, factor: 1, minTimeout: 10, maxTimeout: 20 },
  requestTimeoutMs: 3000,
  startTimeoutMs: 30_000, // only ends a hung test (loaded machines)
  downloadTimeoutMs: 3000,
};

/** An enabled channels.slack section pointed at `fake`, U1 allowed; `extra` overrides any key. */
export function slackSection(fake: FakeSlack, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    enabled: true,
    botToken: fake.botToken,
    appToken: fake.appToken,
    apiUrl: fake.apiUrl,
    allowFrom: ["U1"],
    ...extra,
  };
}

/** A turn event answering `msg` (as the agent loop publishes it), for channel.onTurn. */
export function turnOf(kind: TurnEvent["kind"], msg: InboundMessage, turnId: string): TurnEvent {
  const messageId = msg.messageId;
  return {
    kind,
    turnId,
    channel: msg.channel,
    chatId: msg.chatId,
    ...(typeof messageId === "string" ? { replyTo: messageId } : {}),
    ...(kind === "turnEnd" ? { outcome: "done" as const } : {}),
  };
}

export interface SlackRig {
  fake: FakeSlack;
  channel: SlackChannel;
  workspace: string;
  inbound: InboundMessage[];
  /** Messages with files the channel journaled (reserved) before downloading them. */
  reserved: InboundMessage[];
  /** Resolves with the nth (1-based) published message. */
  nextInbound(n: number, timeoutMs?: number): Promise<InboundMessage>;
  start(): Promise<void>;
  cleanup(): Promise<void>;
}

export async function slackRig(
  config: Record<string, unknown> = {},
  opts: {
    tuning?: SlackTuning;
    maxMediaBytes?: number;
    fake?: FakeSlack;
    transcriber?: Transcriber;
    /** The sink's answer to button presses (none: the sink has no choose). */
    choose?: InboundSink["choose"];
    /** The sink's stored (cluster mode: resolves once the published messages are stored); none: one process. */
    stored?: InboundSink["stored"];
    /** The channel's logger (default: silent, or PALAVER_LOG_LEVEL). */
    log?: Logger;
  } = {},
): Promise<SlackRig> {
  const fake = opts.fake ?? (await FakeSlack.start());
  const workspace = await mkdtemp(join(tmpdir(), "palaver-slack-"));
  const parsed = SlackConfigSchema.parse(slackSection(fake, { allowFrom: ["*"], ...config }));
  const channel = new SlackChannel({
    config: parsed,
    workspace,
    maxMediaBytes: opts.maxMediaBytes ?? 1024 * 1024,
    ...(opts.transcriber ? { transcriber: opts.transcriber } : {}),
    log: opts.log ?? pino({ level: process.env.PALAVER_LOG_LEVEL ?? "silent" }),
    ...FAST,
    ...opts.tuning,
  });
  const inbound: InboundMessage[] = [];
  const reserved: InboundMessage[] = [];
  const waiters: (() => boolean)[] = [];
  const abort = new AbortController();
  return {
    fake,
    channel,
    workspace,
    inbound,
    reserved,
    nextInbound(n, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (inbound.length < n) return false;
          clearTimeout(timer);
          resolve(inbound[n - 1]!);
          return true;
        };
        const timer = setTimeout(
          () => reject(new Error(`no inbound message #${n} within ${timeoutMs} ms`)),
          timeoutMs,
        );
        if (!check()) waiters.push(check);
      });
    },
    async start() {
      const publishInbound = (msg: InboundMessage) => {
        inbound.push(msg);
        for (const w of waiters.splice(0)) if (!w()) waiters.push(w);
      };
      await channel.start(
        {
          // The manager's gate, by the channel's allowFrom.
          allows: (msg) => isAllowed(msg, parsed.allowFrom),
          publishInbound,
          // Recorded with the others: tests look for a refused message among the inbound ones.
          refuse: publishInbound,
          reserve: (draft) => {
            reserved.push(draft);
            return { publish: publishInbound, cancel: () => undefined };
          },
          ...(opts.choose ? { choose: opts.choose } : {}),
          ...(opts.stored ? { stored: opts.stored } : {}),
        },
        abort.signal,
      );
    },
    async cleanup() {
      abort.abort();
      await channel.stop();
      if (!opts.fake) {
        await fake.waitForDisconnect().catch(() => undefined);
        await fake.close();
      }
      await rm(workspace, { recursive: true, force: true });
    },
  };
}

/**
 * A Gateway in this process (agent, channel manager, sessions) with the real Slack adapter against
 * FakeSlack and the model behind FakeOpenAI, in a temp folder; finals are posts (streaming has its
 * own tests). `create` in beforeEach, `start` with the slack section's changes, `close` in afterEach.
 */
export class SlackGatewayRig {
  gateway: Gateway | undefined;
  /** The adapter the gateway runs, once started. */
  channel: SlackChannel | undefined;

  private constructor(
    readonly dir: string,
    readonly slack: FakeSlack,
    readonly llm: FakeOpenAI,
  ) {}

  static async create(prefix: string): Promise<SlackGatewayRig> {
    const dir = await mkdtemp(join(tmpdir(), prefix));
    return new SlackGatewayRig(dir, await FakeSlack.start(), await FakeOpenAI.start());
  }

  /** `slack`: keys over slackSection's; `tuning`: over FAST. */
  async start(
    opts: { slack?: Record<string, unknown>; tuning?: Partial<SlackTuning> } = {},
  ): Promise<Gateway> {
    const workspace = join(this.dir, "ws");
    const config = ConfigSchema.parse({
      agents: {
        defaults: { workspace, provider: "custom", model: "fake-model", llm: { maxRetries: 0, timeout: 30 } },
      },
      providers: { custom: { apiKey: "k", apiBase: this.llm.baseURL } },
      channels: { sendProgress: false, streaming: false, slack: slackSection(this.slack, opts.slack) },
      gateway: { heartbeat: { enabled: false }, port: 0 },
      cron: { enabled: false },
    });
    this.gateway = new Gateway({
      loaded: { config, workspace, path: join(this.dir, "config.json") },
      provider: createProvider(config),
      platforms: {
        slack: async (ctx) =>
          (this.channel = (await createSlackChannel(ctx, { ...FAST, ...opts.tuning })) as SlackChannel),
      },
    });
    await this.gateway.start();
    return this.gateway;
  }

  async close(): Promise<void> {
    await this.gateway?.stop(500);
    this.gateway = undefined;
    await this.slack.waitForDisconnect().catch(() => undefined);
    await this.slack.close();
    await this.llm.close();
    await rm(this.dir, { recursive: true, force: true });
  }
}
