/**
 * The chat platforms' config sections, by their key under `channels`: the one
 * list of platforms. Its order is the order of the config sections and of
 * startup. The config schema is built from it here, below channels/, and
 * channels/registry.ts pairs each name with its channel: a name without one,
 * or one without a name, does not compile.
 */
import { DiscordConfigSchema } from "./discord.js";
import { SlackConfigSchema } from "./slack.js";
import { TelegramConfigSchema } from "./telegram.js";
import { WebConfigSchema } from "./web.js";

export const PLATFORM_SECTIONS = {
  telegram: TelegramConfigSchema,
  slack: SlackConfigSchema,
  discord: DiscordConfigSchema,
  web: WebConfigSchema,
} as const;

export type PlatformSections = typeof PLATFORM_SECTIONS;

export type PlatformName = keyof PlatformSections;
