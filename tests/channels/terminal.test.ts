import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { MessageBus } from "../../src/bus/bus.js";
import type { InboundMessage } from "../../src/bus/types.js";
import { TerminalChannel } from "../../src/channels/terminal/adapter.js";
import { ChannelManager } from "../../src/channels/manager.js";

/** A terminal channel on pipes behind a running channel manager; `printed()` is all it wrote. */
async function startTerminal(opts: { progress: boolean; interactive?: boolean }) {
  const input = new PassThrough();
  const output = new PassThrough();
  let printed = "";
  output.on("data", (d: Buffer) => (printed += d.toString()));
  let exited = false;
  const bus = new MessageBus();
  const terminal = new TerminalChannel({
    chatId: "direct",
    input,
    output,
    color: false,
    ...(opts.interactive === false ? { interactive: false } : {}),
    onExit: () => (exited = true),
  });
  const manager = new ChannelManager({ bus, sendProgress: opts.progress, sendToolHints: opts.progress });
  manager.add(terminal, { allowFrom: ["*"] });
  await manager.start();
  return { input, bus, manager, printed: () => printed, exited: () => exited };
}

describe("terminal channel through the channel manager", () => {
  it("publishes typed lines, prints progress, hints and replies, and leaves on exit", async () => {
    const { input, bus, manager, printed, exited } = await startTerminal({ progress: true });
    const inbound: InboundMessage[] = [];
    bus.onInbound((m) => inbound.push(m));

    input.write("what is in notes.md?\n");
    await new Promise((r) => setImmediate(r));
    expect(inbound).toEqual([
      { channel: "cli", senderId: "user", chatId: "direct", content: "what is in notes.md?" },
    ]);

    // The turn the loop runs for that line (exit waits for the lines sent to be answered).
    bus.publishTurn({ kind: "turnStart", turnId: "t1", channel: "cli", chatId: "direct" });
    bus.publishOutbound({ channel: "cli", chatId: "direct", content: "Let me look.", kind: "progress" });
    bus.publishOutbound({
      channel: "cli",
      chatId: "direct",
      content: 'read_file("notes.md")',
      kind: "toolHint",
    });
    bus.publishOutbound({ channel: "cli", chatId: "direct", content: "It says **hello**." });
    await manager.flush(1000);
    expect(printed()).toContain("  Let me look.");
    expect(printed()).toContain('  ↳ read_file("notes.md")');
    expect(printed()).toContain("It says hello.");
    bus.publishTurn({ kind: "turnEnd", turnId: "t1", channel: "cli", chatId: "direct", outcome: "done" });

    input.write("exit\n");
    await new Promise((r) => setImmediate(r));
    expect(exited()).toBe(true);
    await manager.stop();
  });
});

describe("terminal channel and turn events", () => {
  it("a reminder printed during a turn does not bring the prompt back; the turn's end does", async () => {
    const { input, bus, manager, printed } = await startTerminal({ progress: true });
    const prompts = () => printed().split("you › ").length - 1;
    const chat = { channel: "cli", chatId: "direct" };

    input.write("a long question\n");
    await new Promise((r) => setImmediate(r));
    const before = prompts();
    bus.publishTurn({ kind: "turnStart", turnId: "t1", ...chat });
    // A reminder (background turn) arrives while t1 runs.
    bus.publishTurn({ kind: "turnStart", turnId: "cron", ...chat, background: true });
    bus.publishOutbound({ ...chat, content: "Time to stretch!", turnId: "cron" });
    bus.publishTurn({ kind: "turnEnd", turnId: "cron", ...chat, background: true, outcome: "done" });
    await manager.flush(1000);
    expect(printed()).toContain("Time to stretch!");
    expect(prompts()).toBe(before);

    bus.publishOutbound({ ...chat, content: "The long answer.", turnId: "t1" });
    await manager.flush(1000);
    expect(prompts()).toBe(before);
    bus.publishTurn({ kind: "turnEnd", turnId: "t1", ...chat, outcome: "done" });
    expect(prompts()).toBe(before + 1);

    // Idle now: a reminder prints and the prompt comes back with it.
    bus.publishOutbound({ ...chat, content: "Drink water." });
    await manager.flush(1000);
    expect(prompts()).toBe(before + 2);
    await manager.stop();
  });
});

describe("terminal channel leaving", () => {
  it("the end of the input waits until every line sent has been answered", async () => {
    const { input, bus, manager, printed, exited } = await startTerminal({
      progress: false,
      interactive: false,
    });
    const chat = { channel: "cli", chatId: "direct" };

    input.end("first\nsecond\n");
    await new Promise((r) => setImmediate(r));
    expect(exited()).toBe(false);
    bus.publishTurn({ kind: "turnStart", turnId: "t1", ...chat });
    bus.publishOutbound({ ...chat, content: "one", turnId: "t1" });
    bus.publishTurn({ kind: "turnEnd", turnId: "t1", ...chat, outcome: "done" });
    expect(exited()).toBe(false);
    bus.publishTurn({ kind: "turnStart", turnId: "t2", ...chat });
    bus.publishOutbound({ ...chat, content: "two", turnId: "t2" });
    await manager.flush(1000);
    bus.publishTurn({ kind: "turnEnd", turnId: "t2", ...chat, outcome: "done" });
    expect(exited()).toBe(true);
    // Not interactive: no prompt, the replies as they are.
    expect(printed()).toBe("one\ntwo\n");
    await manager.stop();
  });
});

describe("terminal channel and the plan", () => {
  it("prints the turn's checklist each time it changes (a terminal cannot edit what it printed)", async () => {
    // Progress off: the plan is shown all the same.
    const { bus, manager, printed } = await startTerminal({ progress: false });
    const chat = { channel: "cli", chatId: "direct", turnId: "t1" };
    const plan = (content: string) => bus.publishOutbound({ ...chat, content, kind: "plan" });

    bus.publishTurn({ kind: "turnStart", ...chat });
    plan("▶ Read the notes\n☐ Write the report");
    plan("▶ Read the notes\n☐ Write the report"); // written again without a change
    plan("☑ Read the notes\n▶ Write the report");
    bus.publishOutbound({ ...chat, content: "Done." });
    await manager.flush(1000);
    bus.publishTurn({ kind: "turnEnd", ...chat, outcome: "done" });
    await manager.flush(1000);

    expect(printed().split("  ▶ Read the notes\n  ☐ Write the report\n")).toHaveLength(2);
    expect(printed()).toContain("  ☑ Read the notes\n  ▶ Write the report\n");
    expect(printed().indexOf("▶ Write the report")).toBeLessThan(printed().indexOf("Done."));
    await manager.stop();
  });
});
