/** The Slack platform as the registry lists it; importing this file loads no SDK. */
import type { Platform } from "../platform.js";
import { SlackConfigSchema, slackProblems } from "../../config/platforms/slack.js";

export const slack: Platform<"slack", typeof SlackConfigSchema> = {
  name: "slack",
  configSchema: SlackConfigSchema,
  problems: slackProblems,
  create: async (ctx) => (await import("./adapter.js")).createSlackChannel(ctx),
};
