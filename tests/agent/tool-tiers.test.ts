/**
 * Tool tiers through the agent and the fake LLM: deferred tools (here three of two "MCP servers")
 * are listed in the system prompt and left out of the requests until load_tools; loaded, they come
 * after the always-sent tools, so the request's start is byte for byte the same; calling one not
 * loaded runs it (and loads it); calling an unknown tool gets the directory back.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import * as z from "zod";
import { afterEach, describe, expect, it } from "vitest";
import { defineTool } from "../../src/agent/tools/types.js";
import { toolCall, type RecordedRequest } from "../fakes/openai-server.js";
import { startHarness, type Harness } from "../helpers/agent-harness.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

async function start(mode: "auto" | "off" = "auto"): Promise<Harness> {
  h = await startHarness({ config: { tools: { tiers: { mode, minDeferredTokens: 0 } } } });
  for (const [server, name] of [
    ["gh", "issue"],
    ["gh", "pr"],
    ["fs", "read"],
  ] as const) {
    h.tools.register(
      defineTool({
        name: `mcp_${server}_${name}`,
        group: server,
        readOnly: true,
        description: `The ${name} tool of ${server}.\nSecond line not shown in the directory.`,
        parameters: z.object({ id: z.string().optional() }),
        execute: () => Promise.resolve(`${server} ${name} result`),
      }),
    );
  }
  return h;
}

const names = (req: RecordedRequest) => (req.body.tools ?? []).map((t) => t.function.name);
const system = (req: RecordedRequest) => String(req.body.messages[0]!.content);
const toolResults = (req: RecordedRequest) =>
  req.body.messages.filter((m) => m.role === "tool").map((m) => String(m.content));

describe("tool tiers", () => {
  it("sends deferred tools only after load_tools, after the stable ones, keeping the request's start", async () => {
    const h = await start();
    h.fake!.enqueue(
      { toolCalls: [toolCall("load_tools", { names: ["mcp_gh_*"] })] },
      { content: "loaded" },
      { content: "still loaded" },
    );
    await h.ask("chat", "look at the issues");
    await h.ask("chat", "and again");
    const [before, after, nextTurn] = h.fake!.requests as [RecordedRequest, RecordedRequest, RecordedRequest];

    expect(names(before)).toContain("read_file");
    expect(names(before)).toContain("load_tools");
    expect(names(before).filter((n) => /^mcp_|^cron$|^spawn$/.test(n))).toEqual([]);
    expect(system(before)).toContain(
      "## MCP server fs\n- mcp_fs_read: The read tool of fs.\n\n## MCP server gh\n- mcp_gh_issue: The issue tool of gh.\n- mcp_gh_pr: The pr tool of gh.",
    );
    expect(system(before)).toMatch(/## palaver\n- cron: .*\n- delegate: .*\n- spawn: /);
    expect(system(before)).not.toContain("Second line");

    expect(names(after)).toEqual([...names(before), "mcp_gh_issue", "mcp_gh_pr"]);
    expect(system(after)).toBe(system(before));
    const toolsBefore = JSON.stringify(before.body.tools);
    expect(JSON.stringify(after.body.tools).startsWith(toolsBefore.slice(0, -1))).toBe(true);
    // Loaded for the rest of the session, and kept in its metadata.
    expect(names(nextTurn)).toEqual(names(after));
    const file = await readFile(join(h.workspace, "sessions", "test_chat.jsonl"), "utf8");
    expect(file).toContain('"palaver_loaded_tools":["mcp_gh_issue","mcp_gh_pr"]');
  });

  it("starts a new conversation (/new) with the core tools only", async () => {
    const h = await start();
    h.fake!.enqueue(
      { toolCalls: [toolCall("load_tools", { names: ["mcp_fs_read"] })] },
      { content: "loaded" },
    );
    await h.ask("chat", "load it");
    // /new archives the conversation into memory first.
    h.fake!.enqueue({
      toolCalls: [
        toolCall("save_memory", {
          history_entry: "[2026-01-01 10:00] Loaded a tool.",
          memory_update: "# Memory",
        }),
      ],
    });
    expect((await h.ask("chat", "/new")).content).toMatch(/^New conversation started/);
    h.fake!.enqueue({ content: "fresh" });
    await h.ask("chat", "hello again");
    expect(names(h.fake!.requests[1]!)).toContain("mcp_fs_read");
    expect(names(h.fake!.requests.at(-1)!)).not.toContain("mcp_fs_read");
  });

  it("runs a known tool that was not loaded, and loads it for the next calls", async () => {
    const h = await start();
    h.fake!.enqueue({ toolCalls: [toolCall("mcp_fs_read", { id: "1" })] }, { content: "done" });
    await h.ask("chat", "read it");
    const [first, second] = h.fake!.requests as [RecordedRequest, RecordedRequest];
    expect(names(first)).not.toContain("mcp_fs_read");
    expect(toolResults(second)).toEqual(["fs read result"]);
    expect(names(second).at(-1)).toBe("mcp_fs_read");
  });

  it("answers a call to an unknown tool, and load_tools matching nothing, with the directory", async () => {
    const h = await start();
    h.fake!.enqueue(
      { toolCalls: [toolCall("mcp_jira_search", {})] },
      { toolCalls: [toolCall("load_tools", { names: ["mcp_jira_*"] })] },
      { content: "no jira" },
    );
    await h.ask("chat", "search jira");
    const [unknown, noMatch] = toolResults(h.fake!.requests[2]!);
    expect(unknown).toMatch(/^Error: there is no tool named "mcp_jira_search"\. # More tools/);
    expect(unknown).toContain("- mcp_gh_pr: The pr tool of gh.");
    expect(noMatch).toMatch(/^No tool matches mcp_jira_\*\.\n\n# More tools/);
  });

  it('"off" sends every schema with every call and lists nothing', async () => {
    const h = await start("off");
    h.fake!.enqueue({ content: "hi" });
    await h.ask("chat", "hello");
    const req = h.fake!.requests[0]!;
    expect(names(req)).toEqual(expect.arrayContaining(["mcp_gh_issue", "mcp_gh_pr", "mcp_fs_read", "cron"]));
    expect(system(req)).not.toContain("# More tools");
  });
});
