import type { z } from "zod";
import type { OutboundMessage, ReplyPlace } from "../../bus/types.js";

/** What a tool knows about the turn it runs in; its reply place (thread ...) is the origin chat's. */
export interface ToolContext extends ReplyPlace {
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
  /** Metadata of the inbound message (what only its channel reads), for replies to the same chat. */
  metadata?: Record<string, unknown>;
  /**
   * What the turn's sender wrote (the message this turn answers; a subagent gets its spawner's).
   * Empty or absent for background work. In a turn marked untrusted, text the model puts into a
   * URL or search query must come from here or it is asked (approvals/outward.ts).
   */
  senderText?: string;
  /** The files attached to the message this turn answers: the sender's own, not untrusted. */
  media?: readonly string[];
  /** The turn the call runs in, when it runs in one (the plan's checklist message is keyed by it). */
  turnId?: string;
  /** Publishes a message to a chat (used by the `message` tool). */
  publish(msg: OutboundMessage): void;
  /** Mutable per-turn state shared with the runner. */
  turn: TurnState;
}

export interface TurnState {
  /** Set by the `message` tool when it already delivered to the turn's own chat. */
  sentToOriginChat: boolean;
  /**
   * The untrusted content the turn has read, in order (set by the runner when a tool whose output
   * is untrusted returns): a non-empty list marks the turn, and its outward calls are asked.
   */
  untrusted?: UntrustedRead[];
}

/** One read of untrusted content: which tool, and from where (a URL, an MCP server, a file). */
export interface UntrustedRead {
  tool: string;
  source: string;
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
  /**
   * True when calls of this tool in one model response may run at the same time (delegate: each
   * waits on a model of its own). Results still go back in call order. Absent: one after another.
   */
  readonly parallel?: boolean;
  /** The MCP server the tool comes from: the tool directory groups by it (agent/tool-tiers.ts). */
  readonly group?: string;
  /** Appended to a result reused on replay, when the call's effect did not survive the restart. */
  readonly replayNote?: string;
  /**
   * Where this call's output comes from when it is untrusted content (a page's URL, "MCP server
   * x", a file's path), else null: text a stranger may have written, which could try to steer the
   * model. Reading it marks the turn (TurnState.untrusted). Absent: the output is trusted.
   */
  untrustedSource?(args: z.infer<S>, ctx: ToolContext): string | null;
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
