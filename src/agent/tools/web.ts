/**
 * The web tools the model sees: web_search (Brave) and web_fetch.
 * The pieces live in web-search.ts, web-fetch.ts and html.ts.
 */
import { logger } from "../../log.js";
import type { Tool } from "./types.js";
import { createWebFetchTool, type WebFetchOptions } from "./web-fetch.js";
import { createWebSearchTool } from "./web-search.js";

export interface WebToolOptions {
  fetch: WebFetchOptions;
  search: { apiKey: string; maxResults: number; baseUrl?: string };
  /** tools.web.proxy: not implemented yet, requests go direct (a warning is logged). */
  proxy?: string | null;
}

export function createWebTools(opts: WebToolOptions): Tool[] {
  if (opts.proxy) {
    logger("tool.web").warn(
      { proxy: opts.proxy },
      "tools.web.proxy is not supported yet; web_search and web_fetch connect directly",
    );
  }
  return [
    createWebSearchTool({ ...opts.search, timeoutSeconds: opts.fetch.timeoutSeconds }),
    createWebFetchTool(opts.fetch),
  ];
}
