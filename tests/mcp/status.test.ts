import { describe, expect, it } from "vitest";
import { mcpStatusLines } from "../../src/mcp/status.js";

describe("mcpStatusLines", () => {
  it("says how each server is doing, with errors and retry times", () => {
    expect(
      mcpStatusLines([
        { name: "gh", state: "connected", tools: ["mcp_gh_a", "mcp_gh_b"] },
        { name: "one", state: "connected", tools: ["mcp_one_x"] },
        { name: "web", state: "failed", tools: [], error: "fetch failed", retryInMs: 12_300 },
        {
          name: "fs",
          state: "failed",
          tools: ["mcp_fs_read"],
          error: "the server process exited",
          retryInMs: 0,
        },
        { name: "new", state: "idle", tools: [] },
        { name: "slow", state: "connecting", tools: [] },
        { name: "off", state: "disabled", tools: [] },
      ]),
    ).toEqual([
      "gh: connected, 2 tools",
      "one: connected, 1 tool",
      "web: failed (fetch failed); retry in 13 s",
      "fs: failed (the server process exited); restarts on the next call",
      "new: not started yet",
      "slow: connecting",
      "off: disabled",
    ]);
  });
});
