/**
 * The `web_search` tool, backed by the Brave Search API (as in nanobot).
 * tools.web.proxy is not supported (see web.ts): requests go direct.
 */
import * as z from "zod";
import { ToolError, errorMessage } from "../../../util/errors.js";
import { decodeEntities } from "./html-entities.js";
import { defineTool, type Tool } from "../types.js";

export interface WebSearchOptions {
  /** Empty: BRAVE_API_KEY from the environment, else the tool says search is not configured. */
  apiKey: string;
  /** Results when the model does not ask for a count. */
  maxResults: number;
  /** Defaults to the Brave API; tests point it at a loopback fake. */
  baseUrl?: string;
  timeoutSeconds?: number;
}

export const BRAVE_BASE_URL = "https://api.search.brave.com";
const MAX_COUNT = 10;

const BraveResponse = z.object({
  web: z
    .object({
      results: z
        .array(
          z.object({
            title: z.string().default(""),
            url: z.string(),
            description: z.string().optional(),
          }),
        )
        .default([]),
    })
    .optional(),
});

export interface SearchResult {
  title: string;
  url: string;
  description: string;
}

export function createWebSearchTool(opts: WebSearchOptions): Tool {
  return defineTool({
    name: "web_search",
    readOnly: true,
    // Result titles and snippets are written by the pages' authors.
    untrustedSource: ({ query }) => `a web search for "${query}"`,
    description: "Search the web. Returns titles, URLs, and snippets.",
    parameters: z.object({
      query: z.string().describe("Search query"),
      count: z.number().int().min(1).max(MAX_COUNT).optional().describe(`Results (1-${MAX_COUNT})`),
    }),
    async execute({ query, count }, ctx) {
      const apiKey = opts.apiKey || process.env.BRAVE_API_KEY || "";
      if (!apiKey) {
        return (
          "Web search is not configured: there is no Brave Search API key. Tell the user to set " +
          "tools.web.search.apiKey in the config (or the BRAVE_API_KEY environment variable). " +
          "You can still use web_fetch on a URL you know."
        );
      }
      if (query.trim() === "") throw new ToolError("the query is empty");
      const n = Math.min(count ?? opts.maxResults, MAX_COUNT);
      const results = await braveSearch(query, n, apiKey, opts, ctx.signal);
      return formatResults(query, results.slice(0, n));
    },
  });
}

async function braveSearch(
  query: string,
  count: number,
  apiKey: string,
  opts: WebSearchOptions,
  signal: AbortSignal,
): Promise<SearchResult[]> {
  const url = new URL("/res/v1/web/search", opts.baseUrl ?? BRAVE_BASE_URL);
  url.searchParams.set("q", query);
  url.searchParams.set("count", String(count));
  const timeout = AbortSignal.timeout((opts.timeoutSeconds ?? 20) * 1000);
  let res: Response;
  try {
    res = await fetch(url, {
      headers: { accept: "application/json", "x-subscription-token": apiKey },
      signal: AbortSignal.any([signal, timeout]),
    });
  } catch (err) {
    if (signal.aborted) throw err;
    if (timeout.aborted) throw new ToolError("web search timed out", { cause: err });
    throw new ToolError(`web search failed: ${errorMessage(err)}`, { cause: err });
  }
  if (res.status === 401 || res.status === 403) {
    throw new ToolError(`the search API refused the key (HTTP ${res.status}); check tools.web.search.apiKey`);
  }
  if (res.status === 429) throw new ToolError("the search API rate limit was reached; try again later");
  if (!res.ok) throw new ToolError(`web search failed: HTTP ${res.status} ${res.statusText}`);
  let body: unknown;
  try {
    body = await res.json();
  } catch (err) {
    throw new ToolError("web search returned a response that is not JSON", { cause: err });
  }
  const parsed = BraveResponse.safeParse(body);
  if (!parsed.success) throw new ToolError("web search returned an unexpected response shape");
  return (parsed.data.web?.results ?? []).map((r) => ({
    title: cleanSnippet(r.title),
    url: r.url,
    description: cleanSnippet(r.description ?? ""),
  }));
}

/** Numbered title / url / description, one block per result. */
export function formatResults(query: string, results: SearchResult[]): string {
  if (results.length === 0) return `No results for: ${query}`;
  const blocks = results.map((r, i) => {
    const lines = [`${i + 1}. ${r.title || r.url}`, `   ${r.url}`];
    if (r.description) lines.push(`   ${r.description}`);
    return lines.join("\n");
  });
  return `Results for: ${query}\n\n${blocks.join("\n\n")}`;
}

/**
 * Brave puts <strong> around matched words and escapes entities. A tag body
 * never contains "<": with `[^>]*` a flood of "<" made the scan quadratic.
 */
function cleanSnippet(s: string): string {
  return decodeEntities(s.replace(/<[^<>]*>/g, ""))
    .replace(/\s+/g, " ")
    .trim();
}
