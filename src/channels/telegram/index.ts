/** The Telegram platform as the registry lists it; importing this file loads no SDK. */
import type { Platform } from "../platform.js";
import { TelegramConfigSchema, telegramProblems } from "../../config/platforms/telegram.js";

export const telegram: Platform<"telegram", typeof TelegramConfigSchema> = {
  name: "telegram",
  configSchema: TelegramConfigSchema,
  problems: telegramProblems,
  create: async (ctx) => (await import("./adapter.js")).createTelegramChannel(ctx),
};
