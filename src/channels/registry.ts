/**
 * The chat platforms palaver knows. Each entry loads its adapter (and so its
 * SDK) with a dynamic import, only when the channel is enabled: a disabled
 * platform costs nothing at startup. A new platform is one folder under
 * src/channels/ plus one line here.
 */
import type { Config } from "../config/schema.js";
import type { Logger } from "../log.js";
import type { Channel } from "./types.js";

export interface ChannelFactoryContext {
  config: Config;
  workspace: string;
  log: Logger;
}

export type ChannelFactory = (ctx: ChannelFactoryContext) => Promise<Channel>;

export type PlatformName = "telegram" | "slack" | "discord";

export const PLATFORMS: Record<PlatformName, ChannelFactory> = {
  telegram: async (ctx) => (await import("./telegram/adapter.js")).createTelegramChannel(ctx),
  slack: async (ctx) => (await import("./slack/adapter.js")).createSlackChannel(ctx),
  discord: async (ctx) => (await import("./discord/adapter.js")).createDiscordChannel(ctx),
};

export interface EnabledChannel {
  channel: Channel;
  allowFrom: string[];
}

/** Builds every enabled platform's channel; a platform without an adapter is reported, not fatal. */
export async function createEnabledChannels(
  ctx: ChannelFactoryContext,
  platforms: Partial<Record<string, ChannelFactory | undefined>> = PLATFORMS,
): Promise<EnabledChannel[]> {
  const enabled: EnabledChannel[] = [];
  for (const name of Object.keys(platforms) as PlatformName[]) {
    const section = ctx.config.channels[name];
    if (!section.enabled) continue;
    const factory = platforms[name];
    if (!factory) {
      ctx.log.error(
        { channel: name },
        `channels.${name} is enabled, but this version of palaver has no ${name} adapter yet`,
      );
      continue;
    }
    if (section.allowFrom.length === 0) {
      ctx.log.warn(
        { channel: name },
        `channels.${name}.allowFrom is empty, so nobody can talk to the bot there; add user ids (or "*")`,
      );
    }
    try {
      enabled.push({ channel: await factory(ctx), allowFrom: section.allowFrom });
    } catch (err) {
      // A broken platform (missing token, SDK failing to load) must not take the others down.
      ctx.log.error({ channel: name, err }, `channel ${name} could not be created`);
    }
  }
  return enabled;
}
