import type { PlatformDriver } from "./driver.js";
import { telegramDriver } from "./telegram.js";

/** One line per platform. */
export const DRIVERS: PlatformDriver[] = [telegramDriver];
