/**
 * Tool tiers (src/agent/tool-tiers.ts): the tokens of tool schemas sent with every call, with
 * three MCP servers of 20 tools each beside the default tools, with tiers ("auto") against
 * without ("off"). With tiers, the cost per call is the core schemas plus the directory the
 * system prompt carries instead of the rest; loading one server's tools is shown for information.
 * Target: at least 60 % fewer tokens per call.
 */
import * as z from "zod";
import { TokenCounter } from "../src/agent/budget/tokens.js";
import { ToolTiers } from "../src/agent/tool-tiers.js";
import { createDefaultTools } from "../src/agent/tools/index.js";
import { createLoadToolsTool } from "../src/agent/tools/load-tools.js";
import { defineTool } from "../src/agent/tools/types.js";
import { defaultConfig } from "../src/config/schema.js";
import type { BenchResult } from "./types.js";

const TARGET_SAVING = 0.6;
const SERVERS = ["github", "jira", "postgres"];
const TOOLS_PER_SERVER = 20;
const VERBS = ["list", "get", "create", "update", "delete", "search", "comment", "assign", "close", "merge"];
const NOUNS = ["issues", "records"];

/** An MCP tool shaped like real ones: a sentence or two and four described parameters. */
function mcpTool(server: string, i: number) {
  const verb = VERBS[i % VERBS.length]!;
  const noun = NOUNS[Math.floor(i / VERBS.length) % NOUNS.length]!;
  return defineTool({
    name: `mcp_${server}_${verb}_${noun}`,
    group: server,
    description:
      `${verb[0]!.toUpperCase()}${verb.slice(1)} ${noun} in ${server}. Returns the matching ${noun} as JSON ` +
      "with their ids, titles, states, authors and timestamps; paginated, newest first.",
    parameters: z.object({
      project: z.string().describe(`The ${server} project or repository, as owner/name`),
      query: z.string().optional().describe("Free-text filter applied to titles and bodies"),
      state: z.enum(["open", "closed", "all"]).optional().describe("Which states to include (default open)"),
      page: z.number().int().min(1).optional().describe("Page of results, 30 per page, from 1"),
    }),
    execute: () => Promise.resolve(""),
  });
}

export async function benchTools(): Promise<BenchResult> {
  const config = defaultConfig();
  const tools = createDefaultTools(config, "/tmp/palaver-bench-workspace");
  for (const server of SERVERS) {
    for (let i = 0; i < TOOLS_PER_SERVER; i++) tools.register(mcpTool(server, i));
  }
  const counter = new TokenCounter("gpt-4o");
  await counter.load();
  const count = (defs: Parameters<TokenCounter["tools"]>[0]) => counter.tools(defs);
  const tiers = new ToolTiers(tools, config.tools.tiers, count);
  tools.register(
    createLoadToolsTool(tiers, {
      get: () => Promise.reject(new Error("unused")),
      saveMetadata: () => Promise.resolve(),
    }),
  );

  const without = count(new ToolTiers(tools, { ...config.tools.tiers, mode: "off" }, count).definitions({}));
  const directory = counter.text(tiers.directory() ?? "");
  const core = count(tiers.definitions({}));
  const withTiers = core + directory;
  const metadata: Record<string, unknown> = {};
  tiers.load(metadata, tiers.match(["mcp_github_*"]));
  const oneServer = count(tiers.definitions(metadata)) + directory;
  const saving = 1 - withTiers / without;
  return {
    name: "tools",
    target: `tool schema tokens per call with tiers ≥ ${TARGET_SAVING * 100} % fewer than without (3 MCP servers × 20 tools)`,
    value:
      `without tiers ${without} tokens per call; with tiers ${withTiers} (${core} core schemas + ${directory} directory), ` +
      `${Math.round(saving * 100)} % fewer (ratio ${(withTiers / without).toFixed(2)}); ` +
      `with one server's tools loaded ${oneServer} (${Math.round((1 - oneServer / without) * 100)} % fewer)`,
    pass: saving >= TARGET_SAVING,
  };
}
