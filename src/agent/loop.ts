/**
 * The agent loop: takes inbound messages off the bus, keeps one lane per
 * session (messages of one chat run in order; different chats run
 * concurrently up to maxConcurrentTurns), runs turns and puts replies back
 * on the bus. /stop bypasses the lanes so it is never queued behind the turn
 * it stops. The other commands are answered in agent/commands.ts.
 */
import { settleWithin } from "../util/timeout.js";
import { randomUUID } from "node:crypto";
import type { MessageBus } from "../bus/bus.js";
import {
  originOf,
  replyPlaceOf,
  sessionKeyOf,
  SYSTEM_CHANNEL,
  type InboundMessage,
  type Origin,
  type OutboundMessage,
  type TurnEvent,
  type TurnOutcome,
} from "../bus/types.js";
import { userFacingLlmError } from "../llm/user-facing.js";
import type { ChatMessage, Provider } from "../llm/types.js";
import { logger, type Logger } from "../log.js";
import { savedTurnOf, type SavedTurn } from "../sessions/saved-turn.js";
import type { Session } from "../sessions/session.js";
import { LlmError } from "../util/errors.js";
import { Semaphore } from "../util/semaphore.js";
import { parseCommand } from "../bus/commands.js";
import { commandReply, statusReply, type CommandDeps } from "./commands.js";
import { hasImages, withSystemText, type ConversationAgents } from "./agents/conversation.js";
import type { ContextBuilder } from "./context.js";
import { contentForSession } from "./format.js";
import { runTurn, type ApproveCall } from "./runner.js";
import type { ToolCallJournal } from "./tool-replay.js";
import type { ToolRegistry } from "./tools/registry.js";
import type { ToolContext } from "./tools/types.js";
import { reportedUntrusted } from "./untrusted.js";
import { LAST_PROMPT_TOKENS } from "./status-text.js";
import { turnKindOf, withAgentScope, withUsageScope } from "../usage/scope.js";
import { planOf, withPlanReminder } from "./plan.js";
import { withToolDirectory, type ToolTiers } from "./tool-tiers.js";

export interface AgentSettings {
  workspace: string;
  model: string;
  memoryWindow: number;
  maxToolIterations: number;
  /** A reply cut off at the output token limit is continued this many times (agents.defaults.maxContinuations). */
  maxContinuations?: number;
  maxConcurrentTurns: number;
  toolResultMaxChars: number;
  /** Publish each reply as it is written ("delta"s) for channels that show it live (channels.streaming). */
  streaming?: boolean;
}

/** The loop's parts; those the chat commands share are in CommandDeps (agent/commands.ts). */
export interface AgentLoopDeps extends Omit<CommandDeps, "model" | "agents"> {
  bus: MessageBus;
  provider: Provider;
  tools: ToolRegistry;
  context: ContextBuilder;
  settings: AgentSettings;
  /** Replies to background work that mean "nothing to report" are not delivered (heartbeat). */
  isNothingToDo?: (reply: string) => boolean;
  /** Called once a message's turn has ended (replied, failed or stopped): the journal marks it done, metrics count it. */
  onHandled?: (msg: InboundMessage, report: TurnReport) => void;
  /** Records tool calls so a turn replayed after a crash does not repeat them (the gateway's journal). */
  toolJournal?: ToolCallJournal;
  /**
   * Called as a message's turn begins: the journal counts starts, to give up a message that keeps
   * killing the daemon. (A turnStart event names the chat, not the inbound message, so it cannot do this.)
   */
  onTurnStart?: (msg: InboundMessage) => void;
  /**
   * The reply a person gets instead of an answer when the budget is spent and `budget.hardStop` is
   * on (usage/budget.ts), or undefined to answer; the turn then makes no LLM call.
   */
  budgetStop?: () => string | undefined;
  /** Asked before each tool call runs (approvals/gate.ts); absent: every call runs (mode "off"). */
  approve?: ApproveCall;
  /** Named agents: which one runs a conversation (bindings, /agent) and the vision slot (agent/agents/). */
  agents?: Pick<ConversationAgents, "forTurn" | "nameFor" | "command">;
  /** Tool tiers (tools.tiers): which schemas each call sends, and the directory of the rest. */
  tiers?: ToolTiers;
  log?: Logger;
}

interface Lane {
  readonly key: string;
  readonly queue: InboundMessage[];
  /** The turn in progress, if any. */
  current: AbortController | null;
  draining: Promise<void> | null;
}

/** How a message's handling ended, for the journal and metrics. */
export interface TurnReport {
  outcome: "replied" | "failed" | "stopped" | "command";
  durationMs: number;
  /** Tool calls the turn made and whether each succeeded. */
  tools: { name: string; ok: boolean }[];
}

export const NO_REPLY = "I've finished, but I have nothing to add.";

export class AgentLoop {
  private readonly lanes = new Map<string, Lane>();
  private readonly slots: Semaphore;
  private readonly log: Logger;
  private unsubscribe: (() => void) | null = null;
  private accepting = false;
  private lastActive: Origin | undefined;

  private readonly commandDeps: CommandDeps;

  constructor(private readonly deps: AgentLoopDeps) {
    this.slots = new Semaphore(deps.settings.maxConcurrentTurns);
    this.log = deps.log ?? logger("agent");
    this.commandDeps = { ...deps, model: deps.settings.model };
  }

  /**
   * Starts taking messages. `fromBus` false: the bus's messages go elsewhere first (cluster mode's
   * turn queue, which hands each back through `answerNow` and `queueTurn`).
   */
  start({ fromBus = true }: { fromBus?: boolean } = {}): void {
    if (this.accepting) return;
    this.accepting = true;
    if (fromBus) this.unsubscribe = this.deps.bus.onInbound((msg) => this.dispatch(msg));
  }

  /** The chat a person wrote in most recently (where the heartbeat reports). */
  get lastActiveChat(): Origin | undefined {
    return this.lastActive;
  }

  /** Turns running or queued, across all chats. */
  get pending(): number {
    let n = 0;
    for (const lane of this.lanes.values()) n += lane.queue.length + (lane.current ? 1 : 0);
    return n;
  }

  /** Whether a turn of the conversation `sessionKey` runs here now. */
  runsTurnOf(sessionKey: string): boolean {
    return Boolean(this.lanes.get(sessionKey)?.current);
  }

  /** Turns running now (metrics). */
  get activeTurns(): number {
    return this.slots.inUse;
  }

  /** Resolves when every lane is empty (used by `chat -m`, tests and shutdown). */
  async idle(): Promise<void> {
    for (let round = 0; round < 1000; round++) {
      const draining = [...this.lanes.values()].map((lane) => lane.draining).filter((d) => d !== null);
      if (draining.length === 0) return;
      await Promise.all(draining);
    }
  }

  /**
   * Stops taking messages, lets running turns finish for up to `graceMs`,
   * then aborts what is left. Queued messages that never started are logged.
   */
  async shutdown(graceMs: number): Promise<void> {
    this.accepting = false;
    this.unsubscribe?.();
    this.unsubscribe = null;
    for (const lane of this.lanes.values()) {
      if (lane.queue.length)
        this.log.warn(
          { session: lane.key, dropped: lane.queue.length },
          "shutdown: queued messages not processed now (the journal replays them at the next start)",
        );
      lane.queue.length = 0;
    }
    if (!(await settleWithin(this.idle(), graceMs))) {
      for (const lane of this.lanes.values()) lane.current?.abort(new Error("shutdown"));
      await this.idle();
    }
  }

  dispatch(msg: InboundMessage): void {
    if (!this.answerNow(msg)) this.queueTurn(msg);
  }

  /**
   * What is answered at once instead of queued behind the chat's turn: /stop, an answer to the
   * question that turn waits on, /status while a question waits; and anything arriving while
   * shutting down (dropped: the journal keeps it). Returns whether `msg` was taken here.
   */
  answerNow(msg: InboundMessage): boolean {
    if (!this.accepting) {
      this.log.warn(
        { channel: msg.channel, chatId: msg.chatId },
        "message arrived while shutting down; not processed",
      );
      return true;
    }
    const key = sessionKeyOf(msg);
    if (msg.channel !== SYSTEM_CHANNEL) {
      this.lastActive = {
        channel: msg.channel,
        chatId: msg.chatId,
        sessionKey: key,
        ...replyPlaceOf(msg),
        metadata: msg.metadata,
      };
      const command = parseCommand(msg.content)?.name;
      if (command === "stop") {
        this.stop(key, msg);
        this.deps.onHandled?.(msg, { outcome: "command", durationMs: 0, tools: [] });
        return true;
      }
      // An answer to a question the chat's turn waits on: queued, it would wait behind that very turn.
      if (!command && this.deps.questions?.takeReply(msg)) {
        this.deps.onHandled?.(msg, { outcome: "command", durationMs: 0, tools: [] });
        return true;
      }
      // Likewise /status while a question waits: answered at once (like /stop), so it can say so.
      if (command === "status" && this.deps.questions?.openIn(msg.channel, msg.chatId).length) {
        void this.statusNow(msg, this.lanes.get(key)?.current ? 1 : 0);
        return true;
      }
    }
    return false;
  }

  /** Queues `msg` in its conversation's lane: its turn runs after the ones before it. */
  queueTurn(msg: InboundMessage): void {
    if (!this.accepting) {
      this.log.warn(
        { channel: msg.channel, chatId: msg.chatId },
        "turn arrived while shutting down; not run",
      );
      return;
    }
    const key = sessionKeyOf(msg);
    const lane = this.laneFor(key);
    lane.queue.push(msg);
    lane.draining ??= this.drain(lane);
  }

  private laneFor(key: string): Lane {
    let lane = this.lanes.get(key);
    if (!lane) {
      lane = { key, queue: [], current: null, draining: null };
      this.lanes.set(key, lane);
    }
    return lane;
  }

  private async drain(lane: Lane): Promise<void> {
    try {
      for (let msg = lane.queue.shift(); msg; msg = lane.queue.shift()) {
        const release = await this.slots.acquire();
        const controller = new AbortController();
        lane.current = controller;
        const started = performance.now();
        const turn: Turn = { id: msg.turnId ?? randomUUID(), msg };
        this.deps.onTurnStart?.(msg);
        this.publishTurn(turn, "turnStart");
        let report: Omit<TurnReport, "durationMs"> = { outcome: "failed", tools: [] };
        try {
          // Every LLM call of the turn, and of what it starts, is counted for its conversation (usage/).
          report = await withUsageScope({ session: lane.key, kind: turnKindOf(msg) }, () =>
            this.handle(turn, controller.signal),
          );
        } catch (err) {
          // One bad message never stops the loop.
          this.log.error({ err, session: lane.key }, "message handling failed");
          this.reply(turn, "Sorry, something went wrong while handling that message. It has been logged.");
        } finally {
          lane.current = null;
          release();
          // Always exactly one turnEnd, after the turn's replies were published.
          this.publishTurn(turn, "turnEnd", turnOutcome(report.outcome));
          // A turn cut off by shutdown is not done: the journal replays it at the next start.
          if (!(controller.signal.aborted && !this.accepting)) {
            this.deps.onHandled?.(msg, { ...report, durationMs: performance.now() - started });
          }
        }
      }
    } finally {
      lane.draining = null;
      if (lane.queue.length === 0) this.lanes.delete(lane.key);
      else lane.draining = this.drain(lane);
    }
  }

  private stop(key: string, msg: InboundMessage): void {
    const current = this.lanes.get(key)?.current;
    // Read before the abort closes them: the turn's questions (and its subagents') are refused by it.
    const asking = this.deps.questions?.openIn(originOf(msg).channel, originOf(msg).chatId).length ?? 0;
    current?.abort(new Error("stopped by user"));
    const subagents = this.deps.subagents?.cancelForSession(key) ?? 0;
    const stopped = [
      ...(current ? ["the running reply"] : []),
      ...(subagents ? [`${subagents} background task${subagents === 1 ? "" : "s"}`] : []),
    ];
    // Answered at once, outside the lanes: /stop is not a turn, so its reply carries no turn id.
    const closed =
      asking && stopped.length
        ? " The question waiting for an answer is closed; nothing it asked about ran."
        : "";
    this.reply(
      { msg },
      stopped.length ? `Stopped ${stopped.join(" and ")}.${closed}` : "Nothing is running.",
    );
  }

  /** /status outside the lanes, with no turn id; `chatSlots`: the slot this chat's waiting turn holds. */
  private async statusNow(msg: InboundMessage, chatSlots: number): Promise<void> {
    try {
      const otherReplies = Math.max(0, this.slots.inUse - chatSlots);
      this.reply({ msg }, await statusReply(msg, this.commandDeps, otherReplies));
    } catch (err) {
      this.log.warn({ err, channel: msg.channel, chatId: msg.chatId }, "/status failed");
    } finally {
      this.deps.onHandled?.(msg, { outcome: "command", durationMs: 0, tools: [] });
    }
  }

  private async handle(turn: Turn, signal: AbortSignal): Promise<Omit<TurnReport, "durationMs">> {
    const { msg } = turn;
    // Background work may write "/..." text; only people run commands.
    const command = msg.channel === SYSTEM_CHANNEL ? null : parseCommand(msg.content);
    if (command) {
      const otherReplies = Math.max(0, this.slots.inUse - 1);
      this.reply(turn, await commandReply(command, msg, this.commandDeps, otherReplies, this.log));
      return { outcome: "command", tools: [] };
    }
    // Commands above still work (/status, /usage); a person's question costs nothing once the budget is spent.
    const spent = msg.channel === SYSTEM_CHANNEL ? undefined : this.deps.budgetStop?.();
    if (spent) {
      this.reply(turn, spent);
      return { outcome: "replied", tools: [] };
    }
    return this.runConversationTurn(turn, signal);
  }

  private async runConversationTurn(
    turn: Turn,
    signal: AbortSignal,
  ): Promise<Omit<TurnReport, "durationMs">> {
    const { msg } = turn;
    const { settings, sessions, context, provider, tools, bus } = this.deps;
    const session = await sessions.get(sessionKeyOf(msg));
    // Cluster mode: this turn ran before on an instance that died after saving it. Its messages are
    // in the session already; only its reply may not have gone out (the outbox sends it once).
    const saved = msg.turnId === undefined ? undefined : savedTurnOf(session.metadata, msg.turnId);
    if (saved) {
      this.log.info(
        { session: session.key, turnId: msg.turnId },
        "turn saved by an earlier attempt; not run again",
      );
      if (saved.reply !== null) this.reply(turn, saved.reply);
      return { outcome: "replied", tools: [] };
    }
    // Background work runs its turn for the chat it came from: tools and replies target that chat.
    const origin = originOf(msg);
    const built = await context.buildMessages({
      history: session.history(settings.memoryWindow),
      content: msg.content,
      media: msg.media,
      channel: origin.channel,
      chatId: origin.chatId,
    });
    const userMessage = built[built.length - 1]!;
    // A named agent's instructions follow the workspace's bootstrap files; its model and tools replace ours.
    const agent = await this.deps.agents?.forTurn(msg, session.metadata, hasImages(userMessage));
    // Tool tiers shape the default tool set; an agent with its own tools sends all of them.
    const tiers = agent?.tools ? undefined : this.deps.tiers;
    const prompt = withToolDirectory(
      agent ? withSystemText(built, agent.prompt) : built,
      tiers?.directory() ?? null,
    );
    const ctx: ToolContext = {
      workspace: settings.workspace,
      channel: origin.channel,
      chatId: origin.chatId,
      sessionKey: session.key,
      signal,
      ...(msg.channel === SYSTEM_CHANNEL
        ? {}
        : { sender: senderOf(msg), senderText: msg.content, media: msg.media ?? [] }),
      ...replyPlaceOf(origin),
      metadata: origin.metadata,
      turnId: turn.id,
      publish: (out) => bus.publishOutbound(out),
      turn: { sentToOriginChat: false, untrusted: reportedUntrusted(msg) },
    };

    // Loaded before the turn runs: a replay on another instance reads the record from the database.
    const replay = await this.deps.toolJournal?.forTurn(msg);
    let result;
    try {
      const run = () =>
        runTurn({
          provider: agent?.provider ?? provider,
          tools: agent?.tools ?? tools,
          messages: prompt,
          maxIterations: agent?.maxIterations ?? settings.maxToolIterations,
          maxContinuations: settings.maxContinuations ?? 0,
          // Read at each call: a todo_write earlier in the turn is in the next call's reminder.
          prepare: (messages) => withPlanReminder(messages, planOf(session.metadata).items),
          ...(tiers
            ? {
                definitions: () => tiers.definitions(session.metadata),
                // A call to a known tool not loaded yet runs, and loads it for the calls after.
                onCall: (name: string) => {
                  if (tiers.load(session.metadata, [name])) void sessions.saveMetadata(session);
                },
              }
            : {}),
          toolResultMaxChars: settings.toolResultMaxChars,
          ctx,
          onProgress: (text) => this.reply(turn, text, "progress"),
          onToolHint: (hint) => this.reply(turn, hint, "toolHint"),
          // Not for background work: a heartbeat's "nothing to report" must not show while it is written.
          ...(settings.streaming && msg.channel !== SYSTEM_CHANNEL
            ? { onText: (text: string) => this.reply(turn, text, "delta") }
            : {}),
          replay,
          ...(this.deps.approve ? { approve: this.deps.approve } : {}),
          ...(this.deps.budget ? { budget: this.deps.budget } : {}),
          // The runtime context and the user's message.
          turnMessages: 2,
        });
      // A conversation bound to a named agent: its calls are counted as that agent's.
      result = await (agent?.name ? withAgentScope({ agent: agent.name, session: session.key }, run) : run());
    } catch (err) {
      // A stopped or failed turn saves nothing, so the session stays clean.
      if (signal.aborted) {
        this.log.info({ session: session.key }, "turn cancelled");
        return { outcome: "stopped", tools: [] };
      }
      if (err instanceof LlmError) {
        // The person is told (the reply below names the address and the fix); the log gets one
        // line for the operator, and the stack only at debug (--verbose).
        this.log.info({ session: session.key, kind: err.kind, provider: err.provider }, err.message);
        this.log.debug({ err, session: session.key }, "LLM call failed");
        this.reply(turn, userFacingLlmError(err));
        return { outcome: "failed", tools: [] };
      }
      throw err;
    }

    const reply = this.replyOf(msg, result.content, ctx.turn.sentToOriginChat, session.key);
    const record = msg.turnId === undefined ? undefined : { id: msg.turnId, reply };
    await this.saveTurn(session, userMessage, result.messages, result.toolsUsed, record);
    // For /status: how full the window was. Kept in memory (written with the next metadata line,
    // e.g. consolidation's), not one more line in the session file per turn.
    if (result.promptTokens !== undefined) session.metadata[LAST_PROMPT_TOKENS] = result.promptTokens;
    this.deps.archiver?.maybeConsolidate(session);
    if (reply !== null) this.reply(turn, reply);
    return { outcome: "replied", tools: toolOutcomes(result.messages) };
  }

  /** What a finished turn answers: none when it wrote to the chat itself or, in the background, had nothing to report. */
  private replyOf(
    msg: InboundMessage,
    content: string | null | undefined,
    sentToOriginChat: boolean,
    sessionKey: string,
  ): string | null {
    if (sentToOriginChat) return null;
    if (msg.channel === SYSTEM_CHANNEL && this.deps.isNothingToDo?.(content ?? "")) {
      this.log.info({ session: sessionKey, from: msg.senderId }, "background turn had nothing to report");
      return null;
    }
    return content?.trim() ? content : NO_REPLY;
  }

  /** `turn`: cluster mode's record of the turn, stored with its messages (sessions/saved-turn.ts). */
  private async saveTurn(
    session: Session,
    userMessage: ChatMessage,
    produced: ChatMessage[],
    toolsUsed: string[],
    turn: SavedTurn | undefined,
  ): Promise<void> {
    const user: ChatMessage = { role: "user", content: contentForSession(userMessage.content) };
    const messages = produced.map((m) => ({ ...m }));
    const final = messages[messages.length - 1];
    if (final && toolsUsed.length) final.tools_used = [...new Set(toolsUsed)];
    await this.deps.sessions.append(session, [user, ...messages], turn);
  }

  /** Publishes to the chat a message belongs to (for background work: its origin chat), tagged with its turn. */
  private reply(
    turn: Partial<Turn> & Pick<Turn, "msg">,
    content: string,
    kind: OutboundMessage["kind"] = "final",
  ): void {
    const origin = originOf(turn.msg);
    this.deps.bus.publishOutbound({
      channel: origin.channel,
      chatId: origin.chatId,
      content,
      kind,
      replyTo: replyToOf(turn.msg),
      ...(turn.id ? { turnId: turn.id } : {}),
      ...replyPlaceOf(origin),
      metadata: origin.metadata,
    });
  }

  private publishTurn(turn: Turn, kind: TurnEvent["kind"], outcome?: TurnOutcome): void {
    const origin = originOf(turn.msg);
    const replyTo = replyToOf(turn.msg);
    this.deps.bus.publishTurn({
      kind,
      turnId: turn.id,
      channel: origin.channel,
      chatId: origin.chatId,
      ...(replyTo ? { replyTo } : {}),
      ...replyPlaceOf(origin),
      ...(origin.metadata ? { metadata: origin.metadata } : {}),
      ...(turn.msg.channel === SYSTEM_CHANNEL ? { background: true } : {}),
      ...(outcome ? { outcome } : {}),
    });
  }
}

/** One message taken off a lane and handled: a conversation turn or a command. */
interface Turn {
  readonly id: string;
  readonly msg: InboundMessage;
}

/** The platform id of the message a reply answers (none for background work). */
function replyToOf(msg: InboundMessage): string | undefined {
  return msg.channel === SYSTEM_CHANNEL ? undefined : msg.messageId;
}

/** How the turn ended, for turnEnd: a command or a reply is "done". */
function turnOutcome(outcome: TurnReport["outcome"]): TurnOutcome {
  switch (outcome) {
    case "replied":
    case "command":
      return "done";
    case "stopped":
    case "failed":
      return outcome;
  }
}

/** Each tool call of a turn and whether it succeeded (tool errors come back as "Error: ..." text). */
function toolOutcomes(messages: ChatMessage[]): { name: string; ok: boolean }[] {
  return messages
    .filter((m) => m.role === "tool")
    .map((m) => ({
      name: m.name ?? "?",
      ok: !(typeof m.content === "string" && m.content.startsWith("Error:")),
    }));
}

/** The person a chat message came from, with the aliases the channel gave. */
function senderOf(msg: InboundMessage): { id: string; aliases: string[] } {
  return { id: msg.senderId, aliases: msg.senderAliases ?? [] };
}
