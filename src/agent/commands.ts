/**
 * The chat commands a turn answers at once, never through the model: /help, /new, /status,
 * /pairing, /agent, /memory and /usage. (/stop is the loop's own: it bypasses the lanes so it is
 * never queued behind the turn it stops.)
 */
import { helpText, type ParsedCommand } from "../bus/commands.js";
import { sessionKeyOf, type InboundMessage } from "../bus/types.js";
import type { Logger } from "../log.js";
import type { SessionStorage } from "../sessions/storage.js";
import { usageReply, type UsageCommandOptions } from "../usage/command.js";
import type { ConversationAgents } from "./agents/conversation.js";
import type { ContextBudget } from "./budget/budget.js";
import type { ScheduleView } from "../cron/types.js";
import type { MemoryArchiver, SubagentControl } from "./extensions.js";
import type { MemoryFiles } from "./memory.js";
import { forgetPlan } from "./plan.js";
import { statusText } from "./status-text.js";
import { forgetLoadedTools } from "./tool-tiers.js";

/** The loop's side of the question desk (approvals/questions.ts). */
export interface QuestionInbox {
  /** True when the message answered a question open in its chat (it then starts no turn). */
  takeReply(msg: InboundMessage): boolean;
  /** What the chat's open questions ask about. */
  openIn(channel: string, chatId: string): string[];
}

/** The loop's side of pairing (pairing/gate.ts): answered at once, never by the model. */
export interface PairingCommands {
  /** `/pairing <args>` from msg's sender: the reply (the gate decides whether they are an owner). */
  command(msg: InboundMessage, args: string): Promise<string>;
  statusLine(): string;
}

/** What the commands read and change; every optional part absent means "not available here". */
export interface CommandDeps {
  sessions: SessionStorage;
  memory: MemoryFiles;
  /** The model /status names. */
  model: string;
  /** Consolidates old messages into memory; /new archives through it. */
  archiver?: MemoryArchiver;
  subagents?: SubagentControl;
  schedule?: ScheduleView;
  /** Extra /status lines (MCP servers ...). */
  statusLines?: () => string[];
  questions?: QuestionInbox;
  /** The owner's `/pairing` and the /status line about it (pairing/gate.ts). */
  pairing?: PairingCommands;
  /** `/memory` and `/memory undo` (recall/chat-command.ts). */
  memoryCommand?: (msg: InboundMessage, args: string) => Promise<string>;
  /** `/usage`: the usage ledger and who sees the whole bot (usage/command.ts). */
  usage?: UsageCommandOptions;
  budget?: ContextBudget;
  /** Named agents: /agent and the agent /status names (agent/agents/). */
  agents?: Pick<ConversationAgents, "nameFor" | "command">;
}

/**
 * The reply to a command from msg's sender. `otherReplies`: replies running in other chats, for
 * /status (the loop knows its slots).
 */
export async function commandReply(
  command: ParsedCommand,
  msg: InboundMessage,
  deps: CommandDeps,
  otherReplies: number,
  log: Logger,
): Promise<string> {
  switch (command.name) {
    case "help":
      return helpText();
    case "new":
      return startNewConversation(msg, deps, log);
    case "status":
      return statusReply(msg, deps, otherReplies);
    case "pairing":
      return (
        deps.pairing?.command(msg, command.args) ??
        "Pairing codes are approved in the gateway's chats, or with `palaver pairing approve <code>`."
      );
    case "agent":
      return agentCommand(msg, command.args, deps);
    case "memory":
      return (await deps.memoryCommand?.(msg, command.args)) ?? "Memory versions are not kept here.";
    case "usage":
      return deps.usage ? usageReply(msg, sessionKeyOf(msg), deps.usage) : "Usage is not recorded here.";
    case "stop":
      // The loop answers /stop before queueing; reaching here means nothing was running.
      return "Nothing is running.";
  }
}

/** /status: gathers what status-text.ts says from the loop's parts. */
export async function statusReply(
  msg: InboundMessage,
  deps: CommandDeps,
  otherReplies: number,
): Promise<string> {
  const session = await deps.sessions.get(sessionKeyOf(msg));
  return statusText(msg, {
    model: deps.model,
    session,
    memoryChars: (await deps.memory.readMemory()).length,
    otherReplies,
    ...(deps.agents ? { agentName: await deps.agents.nameFor(msg, session.metadata) } : {}),
    ...(deps.subagents ? { subagents: deps.subagents } : {}),
    ...(deps.budget ? { budget: deps.budget } : {}),
    ...(deps.questions ? { questions: deps.questions } : {}),
    ...(deps.pairing ? { pairing: deps.pairing } : {}),
    ...(deps.statusLines ? { hostLines: deps.statusLines } : {}),
    ...(deps.schedule ? { schedule: deps.schedule } : {}),
  });
}

/** /agent: list the agents, or switch this conversation to one (agent/agents/conversation.ts). */
async function agentCommand(msg: InboundMessage, args: string, deps: CommandDeps): Promise<string> {
  if (!deps.agents) return "Named agents are not available here.";
  const session = await deps.sessions.get(sessionKeyOf(msg));
  const { text, save } = await deps.agents.command(msg, args, session.metadata);
  if (save) await deps.sessions.saveMetadata(session);
  return text;
}

/** /new: archive what memory has not seen yet, then clear. If archiving fails, keep everything. */
async function startNewConversation(msg: InboundMessage, deps: CommandDeps, log: Logger): Promise<string> {
  const session = await deps.sessions.get(sessionKeyOf(msg));
  if (deps.archiver) {
    try {
      await deps.archiver.archiveAll(session);
    } catch (err) {
      log.warn({ err, session: session.key }, "/new: archiving into memory failed; session kept");
      return (
        "I couldn't save this conversation into long-term memory, so I kept it as it is. " +
        "Please try /new again in a moment."
      );
    }
  }
  // The plan and the loaded tools belong to the conversation that ends here.
  forgetPlan(session.metadata);
  forgetLoadedTools(session.metadata);
  await deps.sessions.clear(session);
  return "New conversation started. What we talked about is saved in memory.";
}
