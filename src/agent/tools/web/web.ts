/**
 * The web tools the model sees: web_search (Brave) and web_fetch.
 * The pieces live in search.ts, fetch.ts and html.ts beside this file.
 */
import { logger } from "../../../log.js";
import type { Tool } from "../types.js";
import { createWebFetchTool, type WebFetchOptions } from "./fetch.js";
import { createWebSearchTool } from "./search.js";

export interface WebToolOptions {
  fetch: WebFetchOptions;
  search: { apiKey: string; maxResults: number; baseUrl?: string };
  /**
   * tools.web.proxy: accepted (nanobot configs have it) but not supported: web_fetch connects to
   * the address its SSRF check approved (pinned per hop), which a proxy would resolve on its own.
   * Requests go direct and a warning says so.
   */
  proxy?: string | null;
}

export function createWebTools(opts: WebToolOptions): Tool[] {
  if (opts.proxy) {
    logger("tool.web").warn(
      { proxy: opts.proxy },
      "tools.web.proxy is not supported; web_search and web_fetch connect directly",
    );
  }
  return [
    createWebSearchTool({ ...opts.search, timeoutSeconds: opts.fetch.timeoutSeconds }),
    createWebFetchTool(opts.fetch),
  ];
}
