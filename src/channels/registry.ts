/**
 * The chat platforms palaver knows, as channels: each name of the config's
 * platform list (config/platforms/index.ts) with its descriptor. The factories
 * the gateway starts and the checks of `palaver config check` / `palaver
 * status` are derived from it, so a new platform is one folder under
 * src/channels/ (with its index.ts descriptor), its config section in
 * config/platforms/, one line in that list and its descriptor here.
 *
 * A descriptor imports only its platform's config section; `create` loads the
 * adapter (and so the SDK) with a dynamic import, only when the channel is
 * enabled and its config has no problems: a disabled platform costs nothing.
 */
import type { Config } from "../config/schema.js";
import { PLATFORM_SECTIONS, type PlatformName, type PlatformSections } from "../config/platforms/index.js";
import { discord } from "./discord/index.js";
import { slack } from "./slack/index.js";
import { telegram } from "./telegram/index.js";
import { web } from "./web/index.js";
import { dmPolicyProblems, type DmPolicy } from "../config/platforms/common.js";
import type { ChannelFactory, ChannelFactoryContext, GatewayServices, Platform } from "./platform.js";
import type { Channel } from "./types.js";
import type { ChannelOptions } from "./roster.js";

export type { ChannelFactory, GatewayServices, PlatformName };

/** Every platform of the config's list with its channel, the schema the same: a missing one does not compile. */
const BY_NAME: { [N in PlatformName]: Platform<N, PlatformSections[N]> } = { telegram, slack, discord, web };

export const PLATFORM_NAMES = Object.keys(PLATFORM_SECTIONS) as PlatformName[];

/** The platforms in the config's order, which is the order of startup. */
export const PLATFORM_LIST: readonly Platform<PlatformName>[] = PLATFORM_NAMES.map(
  (name) => BY_NAME[name] as Platform<PlatformName>,
);

/**
 * What createEnabledChannels starts, by platform name. Tests replace it with
 * bare factories: a stand-in for a whole platform, whose config is not checked
 * (a loopback channel needs no token).
 */
export type PlatformTable = Partial<Record<string, Pick<Platform, "create" | "problems"> | ChannelFactory>>;

/** The same platforms by name: the gateway's default table. */
export const PLATFORMS = Object.fromEntries(PLATFORM_LIST.map((p) => [p.name, p])) as Record<
  PlatformName,
  Platform
>;

/** The problems of every enabled platform, in list order (for `config check`, `status`). */
export function platformProblems(config: Pick<Config, "channels">): string[] {
  return PLATFORM_NAMES.flatMap((name) => sectionProblems(name, PLATFORMS[name], config.channels[name]));
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
