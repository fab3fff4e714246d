/**
 * The chat platforms palaver knows: ONE list of descriptors. The channels
 * config schema, the factories the gateway starts and the checks of
 * `palaver config check` / `palaver status` are all derived from it, so a new
 * platform is one folder under src/channels/ (with its index.ts descriptor)
 * plus one line in PLATFORM_LIST.
 *
 * A descriptor imports only its platform's config.ts; `create` loads the
 * adapter (and so the SDK) with a dynamic import, only when the channel is
 * enabled and its config has no problems: a disabled platform costs nothing.
 */
import type { z } from "zod";
import type { Config } from "../config/schema.js";
import type { HttpMount } from "../daemon/health.js";
import type { Logger } from "../log.js";
import type { SessionStore } from "../sessions/store.js";
import { discord } from "./discord/index.js";
import { slack } from "./slack/index.js";
import { telegram } from "./telegram/index.js";
import { web } from "./web/index.js";
import { dmPolicyProblems, type DmPolicy } from "./config-common.js";
import type { Channel } from "./types.js";
import type { ChannelOptions } from "./manager.js";

export interface ChannelFactoryContext {
  config: Config;
  workspace: string;
  log: Logger;
  /** What the gateway lends a channel served from its own process (the web chat); absent elsewhere. */
  gateway?: GatewayServices;
}

export interface GatewayServices {
  /** The gateway's HTTP server (daemon/health.ts): the paths health does not serve. */
  http: HttpMount;
  /** The agent's sessions, read for a conversation's history. */
  sessions: SessionStore;
  /** The state folder (beside the config): where the web chat keeps its token. */
  stateDir: string;
  /** The model answering, for the page's header. */
  model: string;
}

export type ChannelFactory = (ctx: ChannelFactoryContext) => Promise<Channel>;

/** What a platform folder exports from its index.ts. */
export interface Platform<Name extends string = string, Section extends z.ZodType = z.ZodType> {
  /** The key under `channels` in the config, and the channel's name on the bus. */
  readonly name: Name;
  /** Its config section (the shape nanobot's config.json has). */
  readonly configSchema: Section;
  /**
   * What cannot work in an enabled section, in plain words starting with the
   * config path (empty: nothing known to be wrong). A platform with problems
   * is not started; `config check` and `status` report them.
   */
  problems(section: z.output<Section>): string[];
  /** Builds the channel; imports the adapter lazily so an unused SDK is never loaded. */
  create: ChannelFactory;
}

/** The one list. Its order is the order of the config sections and of startup. */
export const PLATFORM_LIST = [telegram, slack, discord, web] as const;

export type PlatformName = (typeof PLATFORM_LIST)[number]["name"];

export const PLATFORM_NAMES: readonly PlatformName[] = PLATFORM_LIST.map((p) => p.name);

/**
 * What createEnabledChannels starts, by platform name. Tests replace it with
 * bare factories: a stand-in for a whole platform, whose config is not checked
 * (a loopback channel needs no token).
 */
export type PlatformTable = Partial<Record<string, Pick<Platform, "create" | "problems"> | ChannelFactory>>;

/** The same platforms by name: the gateway's default table. */
export const PLATFORMS = Object.fromEntries(PLATFORM_LIST.map((p) => [p.name, p as Platform])) as Record<
  PlatformName,
  Platform
>;

/** The problems of every enabled platform, in list order (for `config check`, `status`). */
export function platformProblems(config: Pick<Config, "channels">): string[] {
  return PLATFORM_LIST.flatMap((p) => sectionProblems(p.name, p as Platform, config.channels[p.name]));
}

function sectionProblems(
  name: string,
  platform: Pick<Platform, "problems">,
  section: { enabled: boolean; allowFrom: string[]; dmPolicy?: DmPolicy },
): string[] {
  return section.enabled ? [...dmPolicyProblems(name, section), ...platform.problems(section)] : [];
}

export interface EnabledChannel {
  channel: Channel;
  /** Who may talk to it, and how it streams, from its config section. */
  options: ChannelOptions;
}

/**
 * Builds every enabled platform's channel. A platform with config problems is
 * not started (each problem logged); one without an adapter or whose adapter
 * fails is reported: none of these takes the others down.
 */
export async function createEnabledChannels(
  ctx: ChannelFactoryContext,
  platforms: PlatformTable = PLATFORMS,
): Promise<EnabledChannel[]> {
  const created = await Promise.all(creatingEnabledChannels(ctx, platforms));
  return created.filter((c): c is EnabledChannel => c !== null);
}

/**
 * The same, one promise per enabled platform in table order, each settling with
 * its channel or null (refused or failed, and logged; never rejecting), so the
 * gateway can start a channel while the next one's SDK still loads. They are
 * built one after another: an SDK loading alone is ready soonest.
 */
export function creatingEnabledChannels(
  ctx: ChannelFactoryContext,
  platforms: PlatformTable = PLATFORMS,
): Promise<EnabledChannel | null>[] {
  let previous: Promise<unknown> = Promise.resolve();
  return (Object.keys(platforms) as PlatformName[])
    .filter((name) => ctx.config.channels[name].enabled)
    .map((name) => {
      const creating = previous.then(() => createEnabledChannel(ctx, name, platforms[name]));
      previous = creating;
      return creating;
    });
}

async function createEnabledChannel(
  ctx: ChannelFactoryContext,
  name: PlatformName,
  entry: PlatformTable[string],
): Promise<EnabledChannel | null> {
  const section = ctx.config.channels[name];
  if (!entry) {
    ctx.log.error(
      { channel: name },
      `channels.${name} is enabled, but this version of palaver has no ${name} adapter yet`,
    );
    return null;
  }
  const platform = typeof entry === "function" ? { create: entry, problems: () => [] } : entry;
  const problems = sectionProblems(name, platform, section);
  if (problems.length > 0) {
    for (const problem of problems) ctx.log.error({ channel: name }, problem);
    ctx.log.error(
      { channel: name },
      `channel ${name} is not started: fix channels.${name} as said above (or set enabled to false), then reload`,
    );
    return null;
  }
  if (section.allowFrom.length === 0) {
    ctx.log.warn(
      { channel: name },
      "dmPolicy" in section && section.dmPolicy === "pairing"
        ? `channels.${name}.allowFrom is empty, so only people approved by pairing code can talk to the bot ` +
            "there, and nobody can approve from a chat; add your own user id"
        : `channels.${name}.allowFrom is empty, so nobody can talk to the bot there; add user ids (or "*")`,
    );
  }
  try {
    const options: ChannelOptions = {
      allowFrom: section.allowFrom,
      ...(section.streaming !== undefined ? { streaming: section.streaming } : {}),
      ...(section.streamIntervalMs !== undefined ? { streamIntervalMs: section.streamIntervalMs } : {}),
    };
    return { channel: await platform.create(ctx), options };
  } catch (err) {
    // A broken platform (SDK failing to load, a setting only the adapter can judge) must not take the others down.
    ctx.log.error({ channel: name, err }, `channel ${name} could not be created`);
    return null;
  }
}
