/**
 * A turn cut off (as by a crash) and replayed with the real tools, the real
 * runner, the real openai SDK against FakeOpenAI and the real tool journal
 * over a temp file. The "crash" aborts the turn while the LLM is asked after
 * the tools ran; the "restart" opens a new journal over the same file.
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runTurn, type TurnResult } from "../../src/agent/runner.js";
import { createCronTool } from "../../src/agent/tools/cron.js";
import { createDefaultTools } from "../../src/agent/tools/index.js";
import type { ToolRegistry } from "../../src/agent/tools/registry.js";
import { createSpawnTool } from "../../src/agent/tools/spawn.js";
import type { OutboundMessage } from "../../src/bus/types.js";
import { ConfigSchema } from "../../src/config/schema.js";
import { CronService } from "../../src/cron/service.js";
import { ToolJournal } from "../../src/daemon/tool-journal.js";
import { FakeOpenAI, toolCall, type FakeReply, type FakeToolCall } from "../fakes/openai-server.js";
import { fakeProvider } from "../helpers/fake-provider.js";
import { waitFor } from "../helpers/wait.js";
import { TempDirs } from "./tools/helpers.js";

const temps = new TempDirs();
const silent = pino({ level: "silent" });
const TURN = "journal-id-of-the-message";

let fake: FakeOpenAI;
let workspace: string;
let journalPath: string;
let cron: CronService;
let tools: ToolRegistry;
let published: OutboundMessage[];
let spawned: string[];

beforeEach(async () => {
  fake = await FakeOpenAI.start();
  workspace = await temps.make();
  const state = await temps.make("palaver-state-");
  journalPath = join(state, "journal", "tools.jsonl");
  cron = new CronService({
    storePath: join(state, "cron", "jobs.json"),
    bus: { publishInbound: () => undefined },
    maxCatchUp: 5,
    log: silent,
  });
  tools = createDefaultTools(ConfigSchema.parse({}), workspace);
  tools.register(createCronTool(cron));
  // The subagent manager itself is not under test: a stand-in counts what it is asked to start.
  spawned = [];
  tools.register(
    createSpawnTool({
      spawn: ({ task }) => {
        spawned.push(task);
        return { id: `sub-${spawned.length}`, label: task, queued: false };
      },
    }),
  );
  published = [];
});
afterEach(async () => {
  await fake.close();
  await temps.cleanup();
});

/** One turn in chat telegram:42 with the tool journal opened as a start would (this turn pending). */
function turn(signal: AbortSignal) {
  const journal = new ToolJournal(journalPath, { log: silent });
  journal.open([TURN]);
  const ctx = {
    workspace,
    channel: "telegram",
    chatId: "42",
    sessionKey: "telegram:42",
    signal,
    metadata: { messageId: 1 },
    publish: (msg: OutboundMessage) => published.push(msg),
    turn: { sentToOriginChat: false },
  };
  const run = runTurn({
    provider: fakeProvider(fake),
    tools,
    messages: [{ role: "user", content: "do the things" }],
    maxIterations: 10,
    toolResultMaxChars: 16_000,
    ctx,
    replay: journal.forTurn({
      channel: "telegram",
      senderId: "1",
      chatId: "42",
      content: "",
      metadata: ctx.metadata,
      journalId: TURN,
    }),
  });
  return { run, ctx, journal };
}

/** Runs the turn until the LLM is asked after `steps`, then cuts it off there (the "crash"). */
async function crashAfter(steps: FakeReply[]): Promise<void> {
  fake.enqueue(...steps, { content: "never seen", delayMs: 60_000 });
  const controller = new AbortController();
  const { run } = turn(controller.signal);
  const outcome = run.then(
    () => "finished",
    () => "cut off",
  );
  await waitFor(() => fake.requests.length === steps.length + 1, 10_000, "the LLM asked after the tools");
  controller.abort(new Error("crash"));
  expect(await outcome).toBe("cut off");
}

/** The replay after a restart: the same turn run again to its end. */
async function replay(steps: FakeReply[]): Promise<{ result: TurnResult; sentToOriginChat: boolean }> {
  fake.enqueue(...steps, { content: "done" });
  const { run, ctx, journal } = turn(new AbortController().signal);
  const result = await run;
  journal.close();
  return { result, sentToOriginChat: ctx.turn.sentToOriginChat };
}

const calls = (...toolCalls: FakeToolCall[]): FakeReply => ({ toolCalls });
/** The tool results the LLM was given in a request. */
const toolResults = (index: number) =>
  fake.requests[index]!.body.messages.filter((m) => m.role === "tool").map((m) => m.content as string);
const file = (name: string) => readFile(join(workspace, name), "utf8");

describe("a replayed turn reuses the tool calls its cut-off run completed", () => {
  it("message, write_file, edit_file, exec and cron take effect once; the model gets the same results", async () => {
    const sideEffects = calls(
      toolCall("message", { content: "Tea at five." }),
      toolCall("write_file", { path: "notes.md", content: "draft 1" }),
      toolCall("edit_file", { path: "notes.md", old_text: "draft 1", new_text: "draft 2" }),
      toolCall("exec", { command: "echo ran >> exec.log" }),
      toolCall("cron", { action: "add", message: "stand up", every_seconds: 3600 }),
    );
    await crashAfter([sideEffects]);
    expect(published.map((m) => m.content)).toEqual(["Tea at five."]);
    const firstResults = toolResults(1);
    // Between the crash and the restart the user edits the notes: the replay must not clobber them.
    await writeFile(join(workspace, "notes.md"), "the user's own words");

    // Asked again, the model makes the same calls (arguments in another key order).
    const { result, sentToOriginChat } = await replay([
      calls(
        toolCall("message", { content: "Tea at five." }),
        toolCall("write_file", { content: "draft 1", path: "notes.md" }),
        toolCall("edit_file", { new_text: "draft 2", old_text: "draft 1", path: "notes.md" }),
        toolCall("exec", { command: "echo ran >> exec.log" }),
        toolCall("cron", { every_seconds: 3600, message: "stand up", action: "add" }),
      ),
    ]);

    expect(published).toHaveLength(1);
    expect(await file("notes.md")).toBe("the user's own words");
    expect(await file("exec.log")).toBe("ran\n");
    expect(await cron.list()).toHaveLength(1);
    expect(toolResults(3)).toEqual(firstResults);
    expect(firstResults[4]).toMatch(/^Created job/);
    // As in the first run, the message tool's message was the reply: the loop sends no other.
    expect(sentToOriginChat).toBe(true);
    expect(result.content).toBe("done");
  });

  it("the nth identical call reuses the nth recorded one; further or different calls run", async () => {
    await crashAfter([calls(toolCall("exec", { command: "echo tick >> ticks.log" }))]);
    await replay([
      calls(toolCall("exec", { command: "echo tick >> ticks.log" })),
      calls(toolCall("exec", { command: "echo tick >> ticks.log" })),
      calls(toolCall("exec", { command: "echo tock >> ticks.log" })),
    ]);
    expect(await file("ticks.log")).toBe("tick\ntick\ntock\n");
  });

  it("a side-effecting call the crash cut off is not run again; the model is told it may have happened", async () => {
    fake.enqueue(calls(toolCall("exec", { command: "echo started >> cut.log; sleep 30" })));
    const controller = new AbortController();
    const cut = turn(controller.signal).run.catch(() => "cut off");
    await waitFor(async () => (await file("cut.log").catch(() => "")) !== "", 10_000, "the command started");
    controller.abort(new Error("crash"));
    expect(await cut).toBe("cut off");

    await replay([calls(toolCall("exec", { command: "echo started >> cut.log; sleep 30" }))]);
    expect(await file("cut.log")).toBe("started\n");
    const [told] = toolResults(2);
    expect(told).toMatch(/^Error: this exec call was already started before the assistant restarted/);
    expect(told).toContain("may or may not have taken effect");
  });

  it("spawn starts its subagent once, and the model learns that the restart stopped it", async () => {
    await crashAfter([calls(toolCall("spawn", { task: "research flights", label: "flights" }))]);
    await replay([calls(toolCall("spawn", { task: "research flights", label: "flights" }))]);
    expect(spawned).toEqual(["research flights"]);
    const [reused] = toolResults(3);
    expect(reused).toContain('Subagent "research flights" started (id sub-1)');
    expect(reused).toContain("the restart stopped it, so it will not report back");
  });

  it("read-only tools run again: the replay reads the file as it is now", async () => {
    await writeFile(join(workspace, "plan.md"), "old plan");
    await crashAfter([calls(toolCall("read_file", { path: "plan.md" }))]);
    await writeFile(join(workspace, "plan.md"), "new plan");
    await replay([calls(toolCall("read_file", { path: "plan.md" }))]);
    expect(toolResults(3)).toEqual(["new plan"]);
  });
});
