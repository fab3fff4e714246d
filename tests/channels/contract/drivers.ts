import type { PlatformDriver } from "./driver.js";
import { slackDriver } from "./slack.js";

/** One line per platform. */
export const DRIVERS: PlatformDriver[] = [slackDriver];
