/**
 * Replay without repeated side effects. A turn cut off by a crash is run
 * again at the next start (the message journal replays its inbound message);
 * the LLM is asked again and usually makes the same tool calls. Each call of
 * such a turn is recorded before it runs ("started") and with its result
 * after ("done"), so the replay gives the model the recorded result instead
 * of sending the message, running the command or adding the job again.
 *
 * Calls are matched by tool name, canonical arguments and occurrence: the
 * nth identical call of the replayed turn reuses the nth recorded one; a call
 * the first run never made runs normally. Read-only tools (`readOnly`) are not
 * recorded: running them again is harmless and gives fresher results.
 *
 * The record itself lives in daemon/ (tool-journal.ts); the agent sees only
 * these interfaces. Without a record (`palaver chat`, tests) nothing changes.
 */
import type { InboundMessage } from "../bus/types.js";
import type { TurnState } from "./tools/types.js";

/** Identifies one call within a turn. */
export interface CallKey {
  name: string;
  /** Canonical JSON of the arguments (sorted keys). */
  args: string;
  /** 1 for the first call with this name and arguments in the turn, 2 for the second ... */
  n: number;
}

export type RecalledCall =
  /** It finished: `result` is what the model was given, `turn` the turn state it changed. */
  | { state: "done"; result: string; turn: Partial<TurnState> }
  /** It started and never finished: the process died while it ran. */
  | { state: "started" };

/** The recorded calls of one turn. Recording never throws (a failed write is logged by the journal). */
export interface TurnCallRecord {
  recall(key: CallKey): RecalledCall | undefined;
  started(key: CallKey): void;
  done(key: CallKey, result: string, turn: Partial<TurnState>): void;
}

/** What the loop needs from the tool-call journal (the gateway fills it). */
export interface ToolCallJournal {
  /** The record of this message's turn; undefined when nothing would ever replay it. */
  forTurn(msg: InboundMessage): TurnCallRecord | undefined;
}

/** What the model is told for a side-effecting call that a restart cut off. */
export function interruptedText(name: string): string {
  return (
    `Error: this ${name} call was already started before the assistant restarted, and the restart ` +
    `interrupted it: it may or may not have taken effect. It was not run again. Where you can, check ` +
    `its effect (for example list or read what it would have changed) before calling it again.`
  );
}

export interface RunOnceOptions {
  record: TurnCallRecord;
  key: CallKey;
  turn: TurnState;
  /** The turn's signal: a call cut off by shutdown stays "started", like one cut off by a crash. */
  signal: AbortSignal;
  /** Appended to a reused result (e.g. spawn: the subagent did not survive the restart). */
  replayNote?: string;
  /**
   * Asked before the call is marked started (the approval check): a string is the call's result
   * instead, recorded like one. A call still waiting for its approval when palaver stops never
   * started, so its replay asks again rather than calling it interrupted.
   */
  before?: () => Promise<string | null>;
  run: () => Promise<string>;
}

/** Runs a side-effecting call unless an earlier run of this turn already did (or may have). */
export async function runOnce({
  record,
  key,
  turn,
  signal,
  replayNote,
  before,
  run,
}: RunOnceOptions): Promise<string> {
  const earlier = record.recall(key);
  if (earlier?.state === "done") {
    // E.g. the message tool already wrote to the turn's chat: the replay must not reply again.
    Object.assign(turn, earlier.turn);
    const failed = earlier.result.startsWith("Error:");
    return replayNote && !failed ? `${earlier.result}\n\n${replayNote}` : earlier.result;
  }
  if (earlier?.state === "started") return interruptedText(key.name);
  const instead = before ? await before() : null;
  const stateBefore = { ...turn };
  record.started(key);
  // A throw here is an abort (the registry turns tool errors into text): the call stays "started".
  const result = instead ?? (await run());
  // Aborted by shutdown, the turn is replayed at the next start; what the call did before it was
  // killed is unknown (exec reports "stopped"), so the replay is told just that.
  if (!signal.aborted) record.done(key, result, changedState(stateBefore, turn));
  return result;
}

function changedState(before: TurnState, after: TurnState): Partial<TurnState> {
  const changed: Partial<Record<keyof TurnState, unknown>> = {};
  for (const key of Object.keys(after) as (keyof TurnState)[]) {
    if (after[key] !== before[key]) changed[key] = after[key];
  }
  return changed as Partial<TurnState>;
}
