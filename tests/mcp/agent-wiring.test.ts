/** MCP servers from the config reach the agent built by createAgent: tools in turns, health in /status. */
import { afterEach, describe, expect, it } from "vitest";
import { stdioServerCommand } from "../fakes/mcp-stdio.js";
import { startHarness, type Harness } from "../helpers/agent-harness.js";
import { waitFor } from "../helpers/wait.js";

let h: Harness;
afterEach(async () => {
  await h?.cleanup();
});

describe("MCP through createAgent", () => {
  it("connects configured servers in the background, lets the model call their tools and shows them in /status", async () => {
    h = await startHarness({
      config: {
        tools: {
          mcpServers: {
            fake: stdioServerCommand(),
            broken: { command: "/nonexistent/mcp-server" },
          },
        },
      },
    });
    await waitFor(() => h.tools.has("mcp_fake_echo"), 15_000);

    h.fake!.enqueue(
      { toolCalls: [{ name: "mcp_fake_echo", arguments: { text: "ping" } }] },
      { content: "The server said ping." },
    );
    expect((await h.ask("chat", "echo ping")).content).toBe("The server said ping.");
    const toolResult = (h.fake!.requests[1]!.body.messages as { role: string; content: string }[]).find(
      (m) => m.role === "tool",
    );
    expect(toolResult?.content).toContain("ping");
    expect(h.fake!.requests[0]!.body.tools?.map((t) => t.function.name)).toContain("mcp_fake_echo");

    const status = (await h.ask("chat", "/status")).content;
    expect(status).toMatch(/fake.*connected/i);
    expect(status).toMatch(/broken/);
  });
});
