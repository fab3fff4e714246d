/**
 * Streamed replies in the terminal of `palaver chat`: the real TerminalChannel behind the real
 * ChannelManager (streaming on), fed with the deltas and finals the agent loop publishes. The text
 * is printed once, rendered line by line as each line completes; on a TTY the line being written
 * shows raw and is redrawn rendered in its place; /stop leaves the text with its mark.
 */
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { MessageBus } from "../../src/bus/bus.js";
import type { OutboundMessage } from "../../src/bus/types.js";
import { TerminalChannel } from "../../src/channels/terminal/adapter.js";
import { displayWidth, eraseRows, rowsOf } from "../../src/channels/terminal/stream.js";
import { STOPPED_MARK } from "../../src/channels/live-preview.js";
import { ChannelManager } from "../../src/channels/manager.js";
import { waitFor } from "../helpers/wait.js";

const chat = { channel: "cli", chatId: "direct" };

interface Rig {
  bus: MessageBus;
  manager: ChannelManager;
  input: PassThrough;
  printed: () => string;
  delta(text: string, turnId?: string): void;
  final(content: string, turnId?: string): void;
}

let manager: ChannelManager | undefined;
afterEach(async () => {
  await manager?.stop();
  manager = undefined;
});

async function rig(
  opts: { tty?: { columns: number; rows: number }; interactive?: boolean } = {},
): Promise<Rig> {
  const input = new PassThrough();
  const output: PassThrough & { isTTY?: boolean; columns?: number; rows?: number } = new PassThrough();
  if (opts.tty) Object.assign(output, { isTTY: true, ...opts.tty });
  let printed = "";
  output.on("data", (d: Buffer) => (printed += d.toString()));
  const bus = new MessageBus();
  const terminal = new TerminalChannel({
    chatId: "direct",
    input,
    output,
    color: false,
    interactive: opts.interactive ?? true,
    onExit: () => undefined,
  });
  manager = new ChannelManager({ bus, sendProgress: true, sendToolHints: true, streaming: true });
  manager.add(terminal, { allowFrom: ["*"] });
  await manager.start();
  const publish = (msg: OutboundMessage) => bus.publishOutbound(msg);
  return {
    bus,
    manager,
    input,
    printed: () => printed,
    delta: (content, turnId = "t1") => publish({ ...chat, content, kind: "delta", turnId }),
    final: (content, turnId = "t1") => publish({ ...chat, content, turnId }),
  };
}

/** Types a line and starts its turn, as the agent loop would. */
async function ask(r: Rig, line: string, turnId = "t1"): Promise<void> {
  r.input.write(`${line}\n`);
  await new Promise((resolve) => setImmediate(resolve));
  r.bus.publishTurn({ kind: "turnStart", turnId, ...chat });
}

/** Publishes `text` (the whole reply so far) and waits until the screen ends with `shown`. */
async function grow(r: Rig, text: string, shown: string): Promise<void> {
  r.delta(text);
  await waitFor(() => r.printed().endsWith(shown), undefined, `"${shown}" printed`);
}

describe("terminal stream: pure pieces", () => {
  it("counts rows with the terminal's width: wrapped lines, wide characters, deferred wrap", () => {
    expect(rowsOf("abc", 10)).toBe(1);
    expect(rowsOf("0123456789", 10)).toBe(1);
    expect(rowsOf("0123456789x", 10)).toBe(2);
    expect(rowsOf("a\n\nb", 10)).toBe(3);
    expect(rowsOf("a\n", 10)).toBe(2);
    expect(displayWidth("日本語")).toBe(6);
    expect(displayWidth("a\tb")).toBe(9);
    expect(eraseRows(1)).toBe("\r\u001b[J");
    expect(eraseRows(3)).toBe("\r\u001b[2A\u001b[J");
  });
});

describe("terminal channel streaming (not a TTY)", () => {
  it("prints each line rendered once it is complete, never the text twice, then the prompt", async () => {
    const r = await rig();
    await ask(r, "hello?");
    const before = r.printed().length;
    r.delta("Hel");
    r.delta("Hello **wor");
    await grow(r, "Hello **world**\nSec", "\nHello world\n");
    r.final("Hello **world**\nSecond **line**");
    r.bus.publishTurn({ kind: "turnEnd", turnId: "t1", ...chat, outcome: "done" });
    await waitFor(() => r.printed().endsWith("you › "), undefined, "the prompt");
    expect(r.printed().slice(before)).toBe("\nHello world\nSecond line\n\nyou › ");
  });

  it("a code fence spanning deltas is followed: its lines stay as written", async () => {
    const r = await rig();
    await ask(r, "code");
    const before = r.printed().length;
    await grow(r, "Run:\n```\n# not a heading\n", "# not a heading\n");
    r.final("Run:\n```\n# not a heading\n```\n# Done");
    r.bus.publishTurn({ kind: "turnEnd", turnId: "t1", ...chat, outcome: "done" });
    await waitFor(() => r.printed().endsWith("you › "), undefined, "the prompt");
    expect(r.printed().slice(before)).toBe("\nRun:\n```\n# not a heading\n```\nDONE\n\nyou › ");
  });

  it("a text that is not an extension (the think filter reset) starts over on a new line", async () => {
    const r = await rig();
    await ask(r, "think");
    const before = r.printed().length;
    await grow(r, "Sure <\n", "Sure <\n");
    await grow(r, "Sure, here\n", "Sure, here\n");
    expect(r.printed().slice(before)).toBe("\nSure <\n\nSure, here\n");
  });

  it("a final that looks as the streamed text is printed once; the prompt comes below it", async () => {
    const r = await rig();
    await ask(r, "hi");
    const before = r.printed().length;
    r.delta("Hi there");
    r.final("Hi there");
    r.bus.publishTurn({ kind: "turnEnd", turnId: "t1", ...chat, outcome: "done" });
    await waitFor(() => r.printed().endsWith("you › "), undefined, "the prompt");
    expect(r.printed().slice(before)).toBe("\nHi there\n\nyou › ");
  });

  it("/stop leaves the printed text with the stopped mark, and the prompt after it", async () => {
    const r = await rig();
    await ask(r, "a long story");
    const before = r.printed().length;
    await grow(r, "Once upon\na time", "Once upon\n");
    r.bus.publishTurn({ kind: "turnEnd", turnId: "t1", ...chat, outcome: "stopped" });
    await waitFor(() => r.printed().endsWith("you › "), undefined, "the prompt");
    const stopped = `\nOnce upon\na time${STOPPED_MARK}\n\nyou › `;
    expect(r.printed().slice(before)).toBe(stopped);
    // Nothing more arrives for that turn.
    r.delta("Once upon\na time there was\n");
    await r.manager.flush(1000);
    expect(r.printed().slice(before)).toBe(stopped);
  });

  it("a tool-calling turn: streamed progress, its hint on a line of its own, then the streamed answer", async () => {
    const r = await rig();
    await ask(r, "what is in notes.md?");
    const before = r.printed().length;
    r.delta("Let me look.");
    r.bus.publishOutbound({ ...chat, content: "Let me look.", kind: "progress", turnId: "t1" });
    r.bus.publishOutbound({ ...chat, content: 'read_file("notes.md")', kind: "toolHint", turnId: "t1" });
    await waitFor(() => r.printed().includes("↳"), undefined, "the hint");
    r.delta("It says");
    r.final("It says hello.");
    r.bus.publishTurn({ kind: "turnEnd", turnId: "t1", ...chat, outcome: "done" });
    await waitFor(() => r.printed().endsWith("you › "), undefined, "the prompt");
    expect(r.printed().slice(before)).toBe(
      '\nLet me look.\n\n  ↳ read_file("notes.md")\n\nIt says hello.\n\nyou › ',
    );
  });

  it("piped input: no stream, the final reply alone", async () => {
    const r = await rig({ interactive: false });
    r.input.end("question\n");
    await new Promise((resolve) => setImmediate(resolve));
    r.bus.publishTurn({ kind: "turnStart", turnId: "t1", ...chat });
    r.delta("Partial");
    r.final("The **answer**.");
    await r.manager.flush(1000);
    r.bus.publishTurn({ kind: "turnEnd", turnId: "t1", ...chat, outcome: "done" });
    expect(r.printed()).toBe("The answer.\n");
  });
});

describe("terminal channel streaming on a TTY", () => {
  it("shows the line being written raw and redraws it rendered in its place once complete", async () => {
    const r = await rig({ tty: { columns: 10, rows: 24 } });
    await ask(r, "count");
    const before = r.printed().length;
    // 14 columns wrap to 2 rows on a 10-column terminal.
    await grow(r, "12345678901234", "12345678901234");
    await grow(r, "12345678901234\n**ab**", "**ab**");
    r.final("12345678901234\n**ab**");
    await waitFor(() => r.printed().endsWith("ab\n\n"), undefined, "the last line drawn");
    expect(r.printed().slice(before)).toBe(
      `\n12345678901234${eraseRows(2)}12345678901234\n**ab**${eraseRows(1)}ab\n\n`,
    );
  });

  it("a line taller than the screen stays raw: only the rest of it follows, never the whole again", async () => {
    const r = await rig({ tty: { columns: 10, rows: 3 } });
    await ask(r, "long");
    const before = r.printed().length;
    const long = "x".repeat(35);
    await grow(r, long, long);
    r.final(`${long}**y**`);
    await waitFor(() => r.printed().endsWith("**y**\n\n"), undefined, "the rest");
    expect(r.printed().slice(before)).toBe(`\n${long}**y**\n\n`);
  });

  it("output printed among the streamed rows: the raw line is ended and only its rest follows", async () => {
    const r = await rig({ tty: { columns: 80, rows: 24 } });
    await ask(r, "reminders?");
    const before = r.printed().length;
    await grow(r, "Checking", "Checking");
    // A reminder (background work) prints in the middle of the stream.
    r.bus.publishOutbound({ ...chat, content: "Time to stretch!", turnId: "cron" });
    await waitFor(() => r.printed().includes("stretch"), undefined, "the reminder");
    await grow(r, "Checking your list", " your list");
    r.final("Checking your list\nDone.");
    await waitFor(() => r.printed().endsWith("Done.\n\n"), undefined, "the final");
    const shown = r.printed().slice(before);
    expect(shown).not.toContain("\u001b[J");
    expect(shown).toMatch(/^\nChecking\n\nTime to stretch!\n\n your list\nDone\.\n\n$/);
  });
});
