/**
 * A whole palaver for Discord tests: the Gateway (agent, channel manager)
 * with the real DiscordChannel (real discord.js) against FakeDiscord, and the
 * real OpenAI provider against FakeOpenAI, over a temp workspace.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  DiscordChannel,
  discordOptionsFrom,
  type DiscordChannelOptions,
} from "../../../src/channels/discord/adapter.js";
import { ConfigSchema, type Config } from "../../../src/config/schema.js";
import { Gateway } from "../../../src/gateway.js";
import { createProvider } from "../../../src/llm/openai-provider.js";
import {
  FakeDiscord,
  type FakeChannel,
  type FakeDiscordOptions,
  type FakeUser,
} from "../../fakes/discord-server.js";
import { FakeOpenAI } from "../../fakes/openai-server.js";

export interface World {
  fake: FakeDiscord;
  llm: FakeOpenAI;
  gateway: Gateway;
  channel: DiscordChannel;
  config: Config;
  workspace: string;
  guildId: string;
  general: FakeChannel;
  /** Allowed in (allowFrom). */
  alice: FakeUser;
  /** Not allowed in. */
  bob: FakeUser;
  /** A mention of the bot, as Discord clients write it. */
  mention: string;
  /** The messages the bot sent to a channel, by any route. */
  sentTo(channelId: string): string[];
  close(): Promise<void>;
}

export interface WorldOptions {
  discord?: Record<string, unknown>;
  channels?: Record<string, unknown>;
  adapter?: Partial<DiscordChannelOptions>;
  fake?: FakeDiscordOptions;
}

export async function startWorld(opts: WorldOptions = {}): Promise<World> {
  const dir = await mkdtemp(join(tmpdir(), "palaver-discord-"));
  const workspace = join(dir, "ws");
  const fake = await FakeDiscord.start(opts.fake);
  const llm = await FakeOpenAI.start();
  const guild = fake.addGuild({ name: "home", channels: ["general", "random"] });
  const alice = fake.addUser("alice");
  const bob = fake.addUser("bob");
  const config = ConfigSchema.parse({
    agents: {
      defaults: {
        workspace,
        provider: "custom",
        model: "fake-model",
        llm: { maxRetries: 1, retryBaseDelay: 0.01, retryMaxDelay: 0.05, timeout: 15 },
      },
    },
    providers: { custom: { apiKey: "k", apiBase: llm.baseURL } },
    channels: {
      // Finals as posts, as these tests count them; streaming has its own tests.
      streaming: false,
      ...opts.channels,
      discord: {
        enabled: true,
        token: fake.token,
        apiUrl: fake.apiUrl,
        allowFrom: [alice.id],
        ...opts.discord,
      },
    },
    gateway: { heartbeat: { enabled: false } },
    cron: { enabled: false },
  });
  let channel: DiscordChannel | undefined;
  const gateway = new Gateway({
    loaded: { config, workspace, path: join(dir, "config.json") },
    provider: createProvider(config),
    platforms: {
      discord: async (ctx) => {
        channel = new DiscordChannel({ ...discordOptionsFrom(ctx), typingIntervalMs: 100, ...opts.adapter });
        return channel;
      },
    },
  });
  await gateway.start();
  if (!channel) throw new Error("the discord channel was not created");
  return {
    fake,
    llm,
    gateway,
    channel,
    config,
    workspace,
    guildId: guild.id,
    general: guild.channels[0]!,
    alice,
    bob,
    mention: `<@${fake.bot.id}>`,
    sentTo: (channelId) => fake.sent.filter((m) => m.channelId === channelId).map((m) => m.content),
    async close() {
      await gateway.stop(500);
      await fake.close();
      await llm.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
