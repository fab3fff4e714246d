import type { PlatformDriver } from "./driver.js";
import { discordDriver } from "./discord.js";

/** One line per platform. */
export const DRIVERS: PlatformDriver[] = [discordDriver];
