/** `palaver chat`: talk to the agent in the terminal, through the same bus and loop as the daemon. */
import { constants } from "node:os";
import { join } from "node:path";
import type { Command } from "commander";
import { createAgent } from "../create-agent.js";
import { MessageBus } from "../bus/bus.js";
import type { OutboundMessage } from "../bus/types.js";
import { TERMINAL_CHANNEL } from "../bus/types.js";
import { TERMINAL_SENDER, TerminalChannel } from "../channels/terminal/adapter.js";
import { dim, renderMarkdown } from "../channels/terminal/format.js";
import { ChannelManager } from "../channels/manager.js";
import type { QuestionDesk } from "../channels/types.js";
import { adminsOf, allowFromOf } from "../config/allow-from.js";
import { cronStorePath, stateDir } from "../config/paths.js";
import { createWorkspace } from "../config/workspace.js";
import { addCommonOptions, loadForCli } from "./common.js";

const SHUTDOWN_GRACE_MS = 10_000;
/**
 * How long `chat -m` waits for the configured MCP servers before its one turn: without them their
 * tools would not exist for it. Bounded, so a broken server delays the answer, never stops it.
 */
const MCP_READY_MS = 10_000;

interface ChatOptions {
  message?: string;
  session: string;
  markdown: boolean;
}

export function registerChatCommand(program: Command): void {
  const cmd = program
    .command("chat")
    .description("chat with the assistant in the terminal")
    .option("-m, --message <text>", "send one message, print the reply and exit")
    .option(
      "-s, --session <id>",
      "session: a chat id of the terminal channel, or nanobot's full key (cli:direct)",
      "direct",
    )
    .option("--no-markdown", "print replies as plain text")
    .action(async (given: ChatOptions) => {
      const opts = { ...given, session: terminalChatId(given.session) };
      // Info logs would land in the middle of the conversation; --verbose brings them back.
      const loaded = loadForCli(cmd, { level: "warn" });
      createWorkspace(loaded.workspace);
      const bus = new MessageBus();
      const agent = createAgent({
        config: loaded.config,
        workspace: loaded.workspace,
        bus,
        cronStorePath: cronStorePath(loaded.path),
        configPath: loaded.path,
        // The person at the terminal is the operator: their reminders are never refused for allowFrom.
        allowFromOf: (channel) =>
          channel === TERMINAL_CHANNEL ? ["*"] : allowFromOf(loaded.config, channel),
        // This chat runs its own reminders while it is open (the gateway cannot print to a terminal).
        terminalChat: opts.session,
        // The operator answers approvals here, reminders' too; other channels keep their config's admins.
        adminsOf: (channel) =>
          channel === TERMINAL_CHANNEL ? [TERMINAL_SENDER] : adminsOf(loaded.config, channel),
        // One message or piped input: nobody reads a question, so what needs an approval is denied at once.
        unattended: opts.message !== undefined || process.stdin.isTTY !== true,
      });
      agent.loop.start();
      if (opts.message !== undefined) {
        const signal = await unlessSignalled(agent.mcp.ensureReady(MCP_READY_MS));
        if (signal) {
          // Stop at once: the servers still starting are ended, not waited for.
          process.stderr.write(`palaver: stopped by ${signal} while waiting for MCP servers to start\n`);
          await agent.shutdown(0);
          process.exit(128 + constants.signals[signal]);
        }
        process.exitCode = await sendOnce(bus, agent.loop, opts);
      } else {
        await interactive(
          bus,
          agent.questions,
          opts,
          join(stateDir(loaded.path), "history", "cli"),
          loaded.config.channels.streaming,
          async () => {
            if (loaded.config.cron.enabled) await agent.cron.start();
          },
        );
      }
      // Also waits for a memory consolidation the conversation started.
      await agent.shutdown(SHUTDOWN_GRACE_MS);
    });
  addCommonOptions(cmd);
}

/** Waits for `work`; a SIGINT or SIGTERM meanwhile ends the wait early and is returned. */
async function unlessSignalled(work: Promise<unknown>): Promise<NodeJS.Signals | undefined> {
  let onSignal: (signal: NodeJS.Signals) => void = () => undefined;
  const signalled = new Promise<NodeJS.Signals>((resolve) => (onSignal = resolve));
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    return await Promise.race([work.then(() => undefined), signalled]);
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

/**
 * The terminal chat a --session names. nanobot takes the whole session key (`-s cli:direct`); here
 * the channel is always the terminal, so its prefix is dropped: both continue cli_direct.jsonl.
 */
function terminalChatId(session: string): string {
  const prefix = `${TERMINAL_CHANNEL}:`;
  return session.startsWith(prefix) && session.length > prefix.length
    ? session.slice(prefix.length)
    : session;
}

/**
 * One message: replies go to stdout, progress to stderr, then exit. A script reads the exit code:
 * 0 only for a real answer; a turn that failed (the LLM unreachable, out of credit...) prints its
 * notice on stderr instead and exits 1.
 */
async function sendOnce(
  bus: MessageBus,
  loop: { idle(): Promise<void> },
  opts: ChatOptions,
): Promise<number> {
  // Rendered for a person on a terminal; piped into a script, the reply stays exactly as the model wrote it.
  const render = process.stdout.isTTY && opts.markdown;
  // A turn's replies wait for its end: only then is it known whether they are an answer or a failure notice.
  const pending = new Map<string, string[]>();
  let failed = false;
  const printReply = (content: string) =>
    process.stdout.write(`${render ? renderMarkdown(content, { color: true }) : content}\n`);
  bus.onOutbound((msg: OutboundMessage) => {
    if (msg.channel !== TERMINAL_CHANNEL || msg.chatId !== opts.session) return;
    // A reply as it is written: one message prints its final alone (a script reads it whole).
    if (msg.kind === "delta") return;
    if ((msg.kind ?? "final") !== "final") {
      process.stderr.write(`${dim(msg.content, process.stderr.isTTY)}\n`);
    } else if (msg.turnId !== undefined && pending.has(msg.turnId)) {
      pending.get(msg.turnId)!.push(msg.content);
    } else {
      printReply(msg.content);
    }
  });
  bus.onTurn((event) => {
    if (event.channel !== TERMINAL_CHANNEL || event.chatId !== opts.session || event.background) return;
    if (event.kind === "turnStart") {
      pending.set(event.turnId, []);
      return;
    }
    const replies = pending.get(event.turnId) ?? [];
    pending.delete(event.turnId);
    if (event.outcome === "done") {
      for (const reply of replies) printReply(reply);
      return;
    }
    failed = true;
    for (const reply of replies) process.stderr.write(`palaver: ${reply}\n`);
    if (replies.length === 0) process.stderr.write(`palaver: the reply ${event.outcome ?? "failed"}\n`);
  });
  bus.publishInbound({
    channel: TERMINAL_CHANNEL,
    senderId: TERMINAL_SENDER,
    chatId: opts.session,
    content: opts.message ?? "",
  });
  await loop.idle();
  return failed ? 1 : 0;
}

/** The terminal as a channel behind the channel manager, like every platform in the daemon. */
async function interactive(
  bus: MessageBus,
  questions: QuestionDesk,
  opts: ChatOptions,
  historyFile: string,
  /** channels.streaming: replies printed as they are written, then their rendered final. */
  streaming: boolean,
  /** Starts what needs the terminal running first: reminders due now print in it. */
  whenRunning: () => Promise<void>,
): Promise<void> {
  // NO_COLOR (no-color.org): no ANSI colours, as for the logs.
  const color = process.stdout.isTTY === true && opts.markdown && !process.env.NO_COLOR;
  // Piped input (`palaver chat < questions.txt`): no prompts, no banner, only the replies.
  const interactive = process.stdin.isTTY === true;
  let leave: () => void = () => undefined;
  const exited = new Promise<void>((resolve) => (leave = resolve));
  const terminal = new TerminalChannel({
    chatId: opts.session,
    input: process.stdin,
    output: process.stdout,
    color,
    // As `chat -m`: rendered for a person reading a terminal, as written for a script.
    renderPiped: process.stdout.isTTY === true && opts.markdown,
    interactive,
    historyFile: interactive ? historyFile : undefined,
    onExit: () => leave(),
  });
  // A person at the terminal sees what the agent is doing; a script reading the output only the replies.
  const manager = new ChannelManager({
    bus,
    sendProgress: interactive,
    sendToolHints: interactive,
    // Only for a person at the terminal: a script reading piped output gets the final replies alone.
    streaming: streaming && interactive,
    questions,
  });
  manager.add(terminal, { allowFrom: ["*"] });
  if (interactive) {
    process.stdout.write(
      `${dim(`palaver — session cli:${opts.session}. /help for commands, Ctrl+C stops a reply, Ctrl+D leaves.`, color)}\n`,
    );
  }
  await manager.start();
  await whenRunning();
  await exited;
  await manager.stop();
  // "exit" with a pipe still open: readline only paused stdin, and an open pipe keeps the process
  // alive until its writer closes it. Nothing more is read from it.
  process.stdin.destroy();
}
