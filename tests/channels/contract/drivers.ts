import type { PlatformDriver } from "./driver.js";
import { discordDriver } from "./discord.js";
import { slackDriver } from "./slack.js";
import { telegramDriver } from "./telegram.js";

/** One line per platform. */
export const DRIVERS: PlatformDriver[] = [telegramDriver, slackDriver, discordDriver];
