/**
 * Streamed replies in the terminal of `palaver chat`: the real TerminalChannel behind the real
 * ChannelManager (streaming on), fed with the deltas and finals the agent loop publishes. The text
 * grows as it arrives (only the new part is printed), then the rendered final replaces it: erased
 * and redrawn on a TTY, below a separator otherwise; /stop leaves the text with its mark.
 */
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { MessageBus } from "../../src/bus/bus.js";
import type { OutboundMessage } from "../../src/bus/types.js";
import { TerminalChannel } from "../../src/channels/cli/adapter.js";
import { displayWidth, eraseRows, rowsOf, streamStep } from "../../src/channels/cli/stream.js";
import { STOPPED_MARK } from "../../src/channels/live-preview.js";
import { ChannelManager } from "../../src/channels/manager.js";
import { waitFor } from "../helpers/wait.js";

const chat = { channel: "cli", chatId: "direct" };
const SEPARATOR = "─".repeat(8);

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

/** Publishes `texts` (each the whole reply so far), waiting for each to be on screen. */
async function grow(r: Rig, texts: string[]): Promise<void> {
  for (const text of texts) {
    r.delta(text);
    await waitFor(() => r.printed().endsWith(text.split("\n").at(-1)!), undefined, `"${text}" printed`);
  }
}

describe("terminal stream: pure pieces", () => {
  it("prints only what is new, and starts over when the text is not an extension", () => {
    expect(streamStep("", "Hel")).toBe("Hel");
    expect(streamStep("Hel", "Hello")).toBe("lo");
    expect(streamStep("Hello", "Hello")).toBe("");
    expect(streamStep("Hello <thi", "Hello")).toBe("\nHello");
  });

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
  it("prints the text as it grows, then the rendered final below a separator, then the prompt", async () => {
    const r = await rig();
    await ask(r, "hello?");
    const before = r.printed().length;
    await grow(r, ["Hel", "Hello **wor", "Hello **world**"]);
    // Each step printed only its new part, after a blank line.
    expect(r.printed().slice(before)).toBe("\nHello **world**");

    r.final("Hello **world**");
    await waitFor(() => r.printed().includes(SEPARATOR), undefined, "the final");
    r.bus.publishTurn({ kind: "turnEnd", turnId: "t1", ...chat, outcome: "done" });
    await waitFor(() => r.printed().endsWith("you › "), undefined, "the prompt");
    expect(r.printed().slice(before)).toBe(`\nHello **world**\n${SEPARATOR}\nHello world\n\nyou › `);
  });

  it("a text that is not an extension (the think filter reset) starts over on a new line", async () => {
    const r = await rig();
    await ask(r, "think");
    const before = r.printed().length;
    await grow(r, ["Sure <", "Sure"]);
    await grow(r, ["Sure, here"]);
    expect(r.printed().slice(before)).toBe("\nSure <\nSure, here");
  });

  it("a final that looks as the streamed text is not printed again; the prompt comes below it", async () => {
    const r = await rig();
    await ask(r, "hi");
    const before = r.printed().length;
    await grow(r, ["Hi there"]);
    r.final("Hi there");
    r.bus.publishTurn({ kind: "turnEnd", turnId: "t1", ...chat, outcome: "done" });
    await waitFor(() => r.printed().endsWith("you › "), undefined, "the prompt");
    expect(r.printed().slice(before)).toBe("\nHi there\n\nyou › ");
  });

  it("/stop leaves the printed text with the stopped mark, and the prompt after it", async () => {
    const r = await rig();
    await ask(r, "a long story");
    const before = r.printed().length;
    await grow(r, ["Once upon", "Once upon a time"]);
    r.bus.publishTurn({ kind: "turnEnd", turnId: "t1", ...chat, outcome: "stopped" });
    await waitFor(() => r.printed().endsWith("you › "), undefined, "the prompt");
    expect(r.printed().slice(before)).toBe(`\nOnce upon a time${STOPPED_MARK}\n\nyou › `);
    // Nothing more arrives for that turn.
    r.delta("Once upon a time there was");
    await r.manager.flush(1000);
    expect(r.printed().slice(before)).toBe(`\nOnce upon a time${STOPPED_MARK}\n\nyou › `);
  });

  it("a tool-calling turn: streamed progress, its hint on a line of its own, then the streamed answer", async () => {
    const r = await rig();
    await ask(r, "what is in notes.md?");
    const before = r.printed().length;
    await grow(r, ["Let me look."]);
    r.bus.publishOutbound({ ...chat, content: "Let me look.", kind: "progress", turnId: "t1" });
    r.bus.publishOutbound({ ...chat, content: 'read_file("notes.md")', kind: "toolHint", turnId: "t1" });
    await waitFor(() => r.printed().includes("↳"), undefined, "the hint");
    await grow(r, ["It says", "It says hello."]);
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
  it("erases the streamed rows (wrapped at the terminal's width) and draws the rendered final", async () => {
    const r = await rig({ tty: { columns: 10, rows: 24 } });
    await ask(r, "count");
    const before = r.printed().length;
    // 14 columns wrap to 2 rows on a 10-column terminal, then a second line: 3 rows.
    await grow(r, ["12345678901234", "12345678901234\n**ab**"]);
    r.final("12345678901234\n**ab**");
    await waitFor(() => r.printed().includes("\u001b[J"), undefined, "the erase");
    const shown = r.printed().slice(before);
    expect(shown).toBe(`\n12345678901234\n**ab**${eraseRows(3)}12345678901234\nab\n\n`);
  });

  it("a key typed while the reply streams: its echo is among the rows, so the final goes below", async () => {
    const r = await rig({ tty: { columns: 80, rows: 24 } });
    await ask(r, "story");
    const before = r.printed().length;
    await grow(r, ["Once"]);
    r.input.write("x");
    r.delta("Once upon a time");
    await waitFor(() => r.printed().endsWith(" upon a time"), undefined, "the rest of the stream");
    r.final("Once upon a time");
    await waitFor(() => r.printed().includes(SEPARATOR), undefined, "the final");
    expect(r.printed().slice(before)).not.toContain("\u001b[J");
  });

  it("output printed among the streamed rows: the final goes below a separator instead", async () => {
    const r = await rig({ tty: { columns: 80, rows: 24 } });
    await ask(r, "reminders?");
    const before = r.printed().length;
    await grow(r, ["Checking"]);
    // A reminder (background work) prints in the middle of the stream.
    r.bus.publishOutbound({ ...chat, content: "Time to stretch!", turnId: "cron" });
    await waitFor(() => r.printed().includes("stretch"), undefined, "the reminder");
    r.delta("Checking your list");
    await waitFor(() => r.printed().endsWith(" your list"), undefined, "the rest of the stream");
    r.final("Checking your list");
    await waitFor(() => r.printed().includes(SEPARATOR), undefined, "the final");
    const shown = r.printed().slice(before);
    expect(shown).not.toContain("\u001b[J");
    expect(shown).toMatch(/^\nChecking\n\nTime to stretch!\n\n your list\n─{8}\nChecking your list\n\n$/);
  });
});
