/**
 * The terminal channel: a readline prompt that publishes what you type and
 * prints replies, progress and tool hints. Ctrl+C cancels a running turn
 * (it sends /stop); at an idle prompt Ctrl+C or Ctrl+D leaves. Whether a
 * turn is running comes from the turn events, so a reminder printed in the
 * middle of a turn does not bring the prompt back early.
 *
 * Leaving (Ctrl+D, "exit", the end of piped input) waits until every line
 * sent before it has been answered: `palaver chat < questions.txt` prints
 * every reply, in order, and then exits. Without a person at it (input not
 * interactive) there is no prompt, and replies are printed as they are.
 *
 * A question (an approval, ask_human) prints its text and how to answer ("[y] Approve  [n] Deny");
 * the line typed next goes in as a normal message, which the agent takes as the answer (it starts
 * no turn), and the prompt's closing edit is printed as a line of its own.
 *
 * With channels.streaming a reply is printed as the model writes it and then replaced by its
 * rendered final (stream.ts); whatever else is printed meanwhile ends the streamed line first.
 */
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import { mkdirPrivateSync } from "../../util/private-fs.js";
import { dirname } from "node:path";
import { clearLine, createInterface, cursorTo, type Interface } from "node:readline";
import type { Channel, InboundSink, PreviewSurface, PreviewTarget } from "../types.js";
import { TERMINAL_CHANNEL, type OutboundMessage, type Question, type TurnEvent } from "../../bus/types.js";
import { parseCommand } from "../../bus/commands.js";
import { aroundTerminalLogs } from "../../log.js";
import { dim, renderMarkdown } from "./format.js";
import { TerminalStream, type StreamOutput } from "./stream.js";

/** The sender id of whatever is typed at the terminal. */
export const TERMINAL_SENDER = "user";
const HISTORY_LINES = 1000;

export interface TerminalChannelOptions {
  chatId: string;
  input: NodeJS.ReadableStream;
  /** Its `columns` and `rows` (a TTY's) let a streamed reply be erased and replaced by its final. */
  output: NodeJS.WritableStream & StreamOutput;
  color: boolean;
  /**
   * Piped input: whether its replies are rendered (default true). `palaver chat` renders them only
   * for a terminal, as `chat -m` does: a script reading the output gets the text as the model wrote it.
   */
  renderPiped?: boolean;
  /** A person types here: prompts are shown (default true; false for piped input). */
  interactive?: boolean;
  /** File keeping the prompt history across runs; none when undefined. */
  historyFile?: string;
  /** Called once when the user leaves (Ctrl+D, Ctrl+C at an idle prompt, "exit"). */
  onExit: () => void;
}

export class TerminalChannel implements Channel {
  readonly name = TERMINAL_CHANNEL;
  private rl: Interface | null = null;
  private bus: InboundSink | null = null;
  /** Lines sent whose turn has not started yet. */
  private queued = 0;
  /** This chat's turns running now (a person's, not background work's). */
  private readonly running = new Set<string>();
  /** Questions shown here and not closed yet: the next line typed answers one. */
  private readonly asking = new Set<string>();
  /** The input ended or the user asked to leave; onExit once the lines sent are answered. */
  private leaving = false;
  private exited = false;
  /** Ctrl+C presses that sent /stop, to tell their answers apart. */
  private ctrlCs = 0;
  /** The /stop ids sent by Ctrl+C, and whether a reply was streaming then (its answer is then not printed). */
  private readonly quietStops = new Map<string, boolean>();
  /** The reply being streamed here (channels.streaming), if any: other output goes around it. */
  private stream: TerminalStream | null = null;

  constructor(private readonly opts: TerminalChannelOptions) {}

  start(bus: InboundSink, signal: AbortSignal): Promise<void> {
    this.bus = bus;
    const interactive = this.opts.interactive ?? true;
    const rl = createInterface({
      input: this.opts.input,
      output: this.opts.output,
      prompt: !interactive ? "" : this.opts.color ? "\u001b[1myou ›\u001b[0m " : "you › ",
      history: loadHistory(this.opts.historyFile),
      historySize: HISTORY_LINES,
      terminal: this.opts.output.isTTY === true,
    });
    this.rl = rl;
    rl.on("line", (line) => this.onLine(line));
    // Typing while a reply streams echoes among its rows: they can no longer be counted and erased.
    if (this.opts.output.isTTY) this.opts.input.on("keypress", () => this.stream?.interrupt());
    rl.on("SIGINT", () => {
      if (this.busy) {
        // One notice, not three: no "(stopping…)" of its own, and when a reply was streaming its
        // "⏹ stopped" mark says it, so the answer to this /stop is not printed (see send).
        const id = `ctrl-c-${++this.ctrlCs}`;
        this.quietStops.set(id, Boolean(this.stream && !this.stream.finished));
        this.publish("/stop", id);
      } else {
        rl.close();
      }
    });
    if (interactive && this.opts.output.isTTY) aroundTerminalLogs((write) => this.besidePrompt(write));
    rl.on("close", () => {
      aroundTerminalLogs(undefined);
      // A closed readline throws on prompt(): nothing is asked any more.
      this.rl = null;
      this.leaving = true;
      // Nobody can answer a question here any more: its turn is stopped rather than left waiting.
      if (this.asking.size) this.publish("/stop");
      this.exitWhenAnswered();
    });
    signal.addEventListener("abort", () => rl.close(), { once: true });
    rl.prompt();
    return Promise.resolve();
  }

  stop(): Promise<void> {
    this.rl?.close();
    this.rl = null;
    return Promise.resolve();
  }

  send(msg: OutboundMessage): Promise<void> {
    const color = this.opts.color;
    switch (msg.kind ?? "final") {
      case "progress":
        this.print(dim(`  ${msg.content}`, color));
        break;
      case "toolHint":
        this.print(dim(`  ↳ ${msg.content}`, color));
        break;
      case "plan":
        // A terminal cannot edit what it printed: each changed checklist is printed (turn-plans.ts).
        this.print(msg.content.replace(/^/gm, "  "));
        break;
      case "question":
        this.print(`\n${renderMarkdown(msg.content, { color })}`);
        if (msg.question) {
          this.print(dim(questionHint(msg.question), color));
          this.asking.add(msg.question.id);
        }
        // The turn waits for this answer: the prompt comes back for it.
        this.rl?.prompt();
        break;
      case "edit":
        if (msg.edit) this.asking.delete(msg.edit.questionId);
        this.print(dim(renderMarkdown(msg.content, { color: false }), color));
        if (!this.busy) this.rl?.prompt();
        break;
      case "delta":
        // Streamed replies reach previewSurface (the channel manager's live preview), not send.
        break;
      case "final":
        if (this.answersQuietStop(msg)) {
          if (!this.busy) this.rl?.prompt();
          break;
        }
        if (this.opts.interactive ?? true) this.print(`\n${renderMarkdown(msg.content, { color })}\n`);
        else
          this.print(this.opts.renderPiped === false ? msg.content : renderMarkdown(msg.content, { color }));
        // A reminder or an answer to /stop while idle: the prompt comes back at once.
        if (!this.busy) this.rl?.prompt();
        break;
    }
    return Promise.resolve();
  }

  onTurn(event: TurnEvent): void {
    // Background work (a reminder) is nobody's line typed here: it neither waits nor stops.
    if (event.chatId !== this.opts.chatId || event.background) return;
    if (event.kind === "turnStart") {
      this.queued = Math.max(0, this.queued - 1);
      this.running.add(event.turnId);
      return;
    }
    this.running.delete(event.turnId);
    const stream = this.stream;
    if (stream && !stream.finished) {
      // The final replacing the stream is queued before this event but printed a few promise steps
      // later (the manager's send queue): the prompt comes back after it, not above it.
      setImmediate(() => {
        stream.end();
        this.turnOver();
      });
      return;
    }
    this.turnOver();
  }

  private turnOver(): void {
    if (!this.busy) this.rl?.prompt();
    this.exitWhenAnswered();
  }

  /**
   * A streamed reply is printed as it grows, then replaced by its rendered final (stream.ts). Only
   * with a person at the terminal: piped input gets the final replies alone.
   */
  previewSurface(target: PreviewTarget): PreviewSurface | undefined {
    if (target.chatId !== this.opts.chatId || !(this.opts.interactive ?? true)) return undefined;
    this.stream?.end();
    this.stream = new TerminalStream(this.opts.output, this.opts.color);
    return this.stream.surface();
  }

  /**
   * Writes a background log line without drawing over the prompt: while the prompt waits for the
   * user, its line is cleared first and drawn again after, with what they had typed so far.
   */
  private besidePrompt(write: () => void): void {
    const rl = this.rl;
    this.stream?.interrupt();
    if (!rl || (this.busy && this.asking.size === 0)) return write();
    clearLine(this.opts.output, 0);
    cursorTo(this.opts.output, 0);
    write();
    rl.prompt(true);
  }

  private exitWhenAnswered(): void {
    if (!this.leaving || this.busy || this.exited) return;
    this.exited = true;
    this.opts.onExit();
  }

  /** Whether a line typed here is waiting for or in its turn (Ctrl+C then stops it). */
  private get busy(): boolean {
    return this.queued > 0 || this.running.size > 0;
  }

  private onLine(line: string): void {
    // Lines piped after "exit" arrive in the same chunk, after the interface closed: not sent.
    if (this.leaving) return;
    const text = line.trim();
    if (!text) {
      this.rl?.prompt();
      return;
    }
    if (text === "exit" || text === "quit" || text === ":q") {
      this.rl?.close();
      return;
    }
    saveHistory(this.opts.historyFile, text);
    // /stop is not a turn (it is answered at once), nor is the answer to a question, nor /status while
    // a question waits (answered at once too, agent/loop.ts); everything else is one.
    const command = parseCommand(text)?.name;
    const atOnce =
      command === "stop" || (this.asking.size > 0 && (command === undefined || command === "status"));
    if (!atOnce) this.queued++;
    this.publish(text);
  }

  private publish(content: string, messageId?: string): void {
    this.bus?.publishInbound({
      channel: TERMINAL_CHANNEL,
      senderId: TERMINAL_SENDER,
      chatId: this.opts.chatId,
      content,
      ...(messageId ? { messageId } : {}),
    });
  }

  /** Whether `msg` answers a Ctrl+C's /stop sent while a reply streamed (its stopped mark said it). */
  private answersQuietStop(msg: OutboundMessage): boolean {
    if (msg.replyTo === undefined || !this.quietStops.has(msg.replyTo)) return false;
    const quiet = this.quietStops.get(msg.replyTo)!;
    this.quietStops.delete(msg.replyTo);
    return quiet;
  }

  private print(text: string): void {
    this.stream?.interrupt();
    this.opts.output.write(`${text}\n`);
  }
}

/** Keys for the approval choices, typed at the terminal instead of pressing a button. */
const CHOICE_KEYS: Record<string, string> = { approve: "y", deny: "n", always: "a" };

/** How to answer a question by typing: "[y] Approve  [n] Deny", numbered options, or any text. */
export function questionHint(question: Question): string {
  const { choices } = question;
  if (choices.length && choices.every((c) => CHOICE_KEYS[c.id]))
    return choices.map((c) => `[${CHOICE_KEYS[c.id]}] ${c.label}`).join("  ");
  if (choices.length)
    return `${choices.map((c, i) => `${i + 1}) ${c.label}`).join("  ")}  (or type your answer)`;
  return "Type your answer.";
}

function loadHistory(file: string | undefined): string[] {
  if (!file) return [];
  try {
    const lines = readFileSync(file, "utf8").split("\n").filter(Boolean);
    const kept = lines.slice(-HISTORY_LINES);
    // Keep the file bounded: rewrite it once it holds twice what we show.
    if (lines.length > 2 * HISTORY_LINES) writeFileSync(file, `${kept.join("\n")}\n`, { mode: 0o600 });
    // readline wants the most recent entry first.
    return kept.reverse();
  } catch {
    return [];
  }
}

function saveHistory(file: string | undefined, line: string): void {
  if (!file) return;
  try {
    mkdirPrivateSync(dirname(file));
    appendFileSync(file, `${line.replace(/\n/g, " ")}\n`, { mode: 0o600 });
  } catch {
    // History is a convenience; never fail a chat over it.
  }
}
