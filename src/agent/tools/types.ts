import type { z } from "zod";
import type { OutboundMessage } from "../../bus/types.js";

/** What a tool knows about the turn it runs in. */
export interface ToolContext {
  workspace: string;
  /** The chat the turn belongs to. */
  channel: string;
  chatId: string;
  sessionKey: string;
  /** Aborted by /stop and shutdown: long-running tools must honour it. */
  signal: AbortSignal;
  /**
   * Who sent the message this turn answers (platform id and aliases such as a
   * Telegram @username). Absent for background work (a cron job firing, a
   * subagent's result, the heartbeat): no person asked for that turn.
   */
  sender?: { id: string; aliases: string[] };
  /** Metadata of the inbound message (message id, thread id ...), for replies that stay in a thread. */
  metadata?: Record<string, unknown>;
  /** Publishes a message to a chat (used by the `message` tool). */
  publish(msg: OutboundMessage): void;
  /** Mutable per-turn state shared with the runner. */
  turn: TurnState;
}

export interface TurnState {
  /** Set by the `message` tool when it already delivered to the turn's own chat. */
  sentToOriginChat: boolean;
}

/**
 * One tool the model can call. `parameters` is a zod object schema: it
 * validates the arguments and is turned into the JSON Schema the model sees.
 */
export interface Tool<S extends z.ZodType = z.ZodType> {
  readonly name: string;
  readonly description: string;
  readonly parameters: S;
  /**
   * True when a call changes nothing (reads a file, fetches a page): a turn
   * replayed after a crash runs it again. Otherwise its completed calls are
   * recorded and their results reused on replay (agent/tool-replay.ts).
   */
  readonly readOnly?: boolean;
  /** Appended to a result reused on replay, when the call's effect did not survive the restart. */
  readonly replayNote?: string;
  /**
   * Returns text for the model. Throwing is fine: the registry turns any
   * error into an "Error: ..." result, so a tool never stops the loop.
   */
  execute(args: z.infer<S>, ctx: ToolContext): Promise<string>;
}

/** Helps inference when defining a tool object literal. */
export function defineTool<S extends z.ZodType>(tool: Tool<S>): Tool<S> {
  return tool;
}
