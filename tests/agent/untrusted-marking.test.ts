/**
 * How a turn gets marked as having read untrusted content, through the whole agent (loop, runner,
 * gate, subagents) with a policy that records what it is asked to decide and allows everything.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { ApprovalPolicy, ApprovalRequest } from "../../src/approvals/types.js";
import { toolCall, type RecordedRequest } from "../fakes/openai-server.js";
import { startHarness, type Harness } from "../helpers/agent-harness.js";
import { waitFor } from "../helpers/wait.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

const seen: ApprovalRequest[] = [];
const recording: ApprovalPolicy = {
  decide: (req) => {
    seen.push(req);
    return { action: "allow", reason: "recorded", layer: "mode" };
  },
};

async function start(): Promise<Harness> {
  seen.length = 0;
  h = await startHarness({
    config: { tools: { approval: { mode: "risky" } } },
    agent: { approvalPolicy: recording },
  });
  await mkdir(join(h.workspace, "media", "test"), { recursive: true });
  await writeFile(join(h.workspace, "media", "test", "theirs.txt"), "someone else's file");
  await writeFile(join(h.workspace, "media", "test", "mine.txt"), "my own file");
  return h;
}

const isSubagent = (req: RecordedRequest) => String(req.body.messages[0]?.content).startsWith("# Subagent");
/** Tool results since the request's last user message: this turn's own. */
const turnTools = (req: RecordedRequest) => {
  const messages = req.body.messages;
  const lastUser = messages.findLastIndex((m) => m.role === "user");
  return messages.slice(lastUser).filter((m) => m.role === "tool").length;
};

describe("marking a turn that read untrusted content", { timeout: 60_000 }, () => {
  it("reading another sender's attachment marks the turn; its own attachment does not", async () => {
    const agent = await start();
    agent.fake!.setHandler((req) => {
      const tools = req.body.messages.filter((m) => m.role === "tool").length;
      if (tools === 0) return { toolCalls: [toolCall("read_file", { path: "media/test/mine.txt" })] };
      if (tools === 1) return { toolCalls: [toolCall("list_dir", { path: "." })] };
      if (tools === 2) return { toolCalls: [toolCall("read_file", { path: "media/test/theirs.txt" })] };
      if (tools === 3) return { toolCalls: [toolCall("list_dir", { path: "media" })] };
      return { content: "ok" };
    });
    const mine = join(agent.workspace, "media", "test", "mine.txt");
    await agent.ask("c1", "read my file", { media: [mine] });
    const byTool = seen.map((r) => [r.tool, r.untrusted ?? []] as const);
    expect(byTool).toEqual([
      ["read_file", []],
      ["list_dir", []],
      ["read_file", []],
      ["list_dir", [{ tool: "read_file", source: join(agent.workspace, "media", "test", "theirs.txt") }]],
    ]);
    expect(seen[0]!.senderText).toBe("read my file");
  });

  it("a subagent spawned from a marked turn starts marked, judged against its spawner's words", async () => {
    const agent = await start();
    agent.fake!.setHandler((req) => {
      const tools = turnTools(req);
      if (isSubagent(req))
        return tools === 0
          ? { toolCalls: [toolCall("list_dir", { path: "." })] }
          : { content: `sub done: ${"what was found, at length. ".repeat(8)}` };
      if (String(req.body.messages.findLast((m) => m.role === "user")?.content).includes("[Subagent")) {
        return tools === 0 ? { toolCalls: [toolCall("list_dir", { path: "." })] } : { content: "reported" };
      }
      if (tools === 0) return { toolCalls: [toolCall("read_file", { path: "media/test/theirs.txt" })] };
      if (tools === 1) return { toolCalls: [toolCall("spawn", { task: "look around" })] };
      return { content: "started" };
    });
    await agent.ask("c1", "check their file in the background");
    await waitFor(
      () => seen.filter((r) => r.tool === "list_dir").length === 2,
      undefined,
      "the subagent and the report turn",
    );
    const source = { tool: "read_file", source: join(agent.workspace, "media", "test", "theirs.txt") };
    const [inSubagent, inReport] = seen.filter((r) => r.tool === "list_dir");
    expect(inSubagent).toMatchObject({
      untrusted: [source],
      senderText: "check their file in the background",
    });
    // The report of a marked subagent marks the turn that reads it (a background turn: no sender text).
    expect(inReport).toMatchObject({ untrusted: [source], senderText: "" });
  });
});
