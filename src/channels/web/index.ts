/** The web chat as the registry lists it; importing this file loads nothing but its config. */
import type { Platform } from "../platform.js";
import { WebConfigSchema, webProblems } from "../../config/platforms/web.js";

export const web: Platform<"web", typeof WebConfigSchema> = {
  name: "web",
  configSchema: WebConfigSchema,
  problems: webProblems,
  create: async (ctx) => (await import("./adapter.js")).createWebChannel(ctx),
};
