import type { PlatformDriver } from "./driver.js";

/** One line per platform. */
export const DRIVERS: PlatformDriver[] = [];
