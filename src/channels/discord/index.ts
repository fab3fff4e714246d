/** The Discord platform as the registry lists it; importing this file loads no SDK. */
import type { Platform } from "../platform.js";
import { DiscordConfigSchema, discordProblems } from "../../config/platforms/discord.js";

export const discord: Platform<"discord", typeof DiscordConfigSchema> = {
  name: "discord",
  configSchema: DiscordConfigSchema,
  problems: discordProblems,
  create: async (ctx) => (await import("./adapter.js")).createDiscordChannel(ctx),
};
