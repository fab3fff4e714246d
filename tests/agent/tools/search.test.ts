/**
 * find_files and grep: through the agent and the fake LLM (the model calls them, the results come
 * back in the next request), under read_file's workspace policy: sessions/ and other chats' media
 * are refused and never searched, outside the workspace is refused.
 */
import { mkdir, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createGrepTool } from "../../../src/agent/tools/grep.js";
import { toolCall, type RecordedRequest } from "../../fakes/openai-server.js";
import { startHarness, type Harness } from "../../helpers/agent-harness.js";
import { makeContext, TempDirs } from "./helpers.js";

let h: Harness | undefined;
const dirs = new TempDirs();

afterEach(async () => {
  await h?.cleanup();
  h = undefined;
  await dirs.cleanup();
});

/** The tool results the model got, in order. */
function toolResults(req: RecordedRequest): string[] {
  return req.body.messages.filter((m) => m.role === "tool").map((m) => String(m.content));
}

/** Asks the agent, which makes `calls` (one per step) and then answers "done"; returns the results. */
async function callTools(calls: ReturnType<typeof toolCall>[]): Promise<string[]> {
  h!.fake!.enqueue(...calls.map((c) => ({ toolCalls: [c] })), { content: "done" });
  const reply = await h!.ask("42", "search");
  expect(reply.content).toBe("done");
  return toolResults(h!.fake!.requests.at(-1)!);
}

async function workspaceWithChats(ws: string): Promise<void> {
  await mkdir(join(ws, "notes", "old"), { recursive: true });
  await writeFile(join(ws, "notes", "a.md"), "alpha\nthe budget is 120\nomega\n");
  await writeFile(join(ws, "notes", "old", "b.md"), "beta\nbudget: 95\n");
  await writeFile(join(ws, "notes", "c.txt"), "no match here\n");
  await writeFile(join(ws, "notes", "blob.bin"), Buffer.from([98, 117, 100, 0, 103, 101, 116]));
  await utimes(join(ws, "notes", "a.md"), new Date("2024-01-01"), new Date("2024-01-01"));
  await utimes(join(ws, "notes", "old", "b.md"), new Date("2025-01-01"), new Date("2025-01-01"));
  await mkdir(join(ws, "sessions"), { recursive: true });
  await writeFile(join(ws, "sessions", "test_43.jsonl"), '{"content":"budget secret of chat 43"}\n');
  await mkdir(join(ws, "media", "test", "43"), { recursive: true });
  await writeFile(join(ws, "media", "test", "43", "theirs.md"), "budget of another chat\n");
}

describe("find_files", () => {
  it("finds by glob, newest first, and never lists sessions/ or other chats' media", async () => {
    h = await startHarness();
    await workspaceWithChats(h.workspace);
    const [byName, byPath, refused, outside] = await callTools([
      toolCall("find_files", { pattern: "*.md" }),
      toolCall("find_files", { pattern: "old/**/*.{md,txt}", path: "notes" }),
      toolCall("find_files", { pattern: "*", path: "sessions" }),
      toolCall("find_files", { pattern: "*", path: "/etc" }),
    ]);
    expect(byName).toMatch(/^2 file\(s\) match \*\.md, newest first:\nnotes\/old\/b\.md .*\nnotes\/a\.md /);
    expect(byName).not.toMatch(/theirs|sessions/);
    expect(byPath).toMatch(/^1 file\(s\) match/);
    expect(byPath).toContain("notes/old/b.md");
    expect(refused).toMatch(/^Error: access denied: sessions is in sessions\//);
    expect(outside).toMatch(/^Error: access denied: \/etc is outside the workspace/);
  });
});

describe("grep", () => {
  it("shows matches with context, skips binary files, and never searches sessions/ or other chats' media", async () => {
    h = await startHarness();
    await workspaceWithChats(h.workspace);
    const [all, withContext, refused, media, invalid] = await callTools([
      toolCall("grep", { pattern: "budget" }),
      toolCall("grep", { pattern: "(?i)BUDGET IS", path: "notes/a.md", context: 1 }),
      toolCall("grep", { pattern: "budget", path: "sessions/test_43.jsonl" }),
      toolCall("grep", { pattern: "budget", path: "media/test/43" }),
      toolCall("grep", { pattern: "budget(" }),
    ]);
    expect(all).toContain("notes/a.md:2: the budget is 120");
    expect(all).toContain("notes/old/b.md:2: budget: 95");
    expect(all).toMatch(/^2 match\(es\) for budget:/);
    // notes/blob.bin, and the memory index where this harness keeps its state (inside the workspace).
    expect(all).toMatch(/\(skipped: [1-9]\d* binary\)/);
    expect(all).not.toMatch(/secret|another chat/);
    expect(withContext).toBe(
      "1 match(es) for (?i)BUDGET IS:\nnotes/a.md-1- alpha\nnotes/a.md:2: the budget is 120\nnotes/a.md-3- omega",
    );
    expect(refused).toMatch(/^Error: access denied: .* is in sessions\//);
    expect(media).toMatch(/^Error: access denied: .* outside this chat's own folder/);
    expect(invalid).toMatch(/^Error: invalid regular expression budget\(/);
  });

  it("ends a catastrophically slow pattern at its time bound and says so", async () => {
    const ws = await dirs.make();
    await writeFile(join(ws, "slow.txt"), `${"a".repeat(40)}!\n`);
    const grep = createGrepTool({ workspace: ws, restrict: true, timeoutMs: 300 });
    const { ctx } = makeContext({ workspace: ws });
    const result = await grep.execute({ pattern: "^(a+)+$" }, ctx);
    expect(result).toMatch(/^No matches for .*\n\(stopped after 0\.3 s: the pattern is too slow/);
  });
});
