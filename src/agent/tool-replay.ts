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
 * The record itself lives in daemon/ (tool-journal.ts, a file; pg-tool-journal.ts,
 * the cluster's database, where the replay may run on another instance); the
 * agent sees only these interfaces. Without a record (`palaver chat`, tests)
 * nothing changes.
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

/** One string per call of a turn (a map key); JSON keeps names and arguments with any characters apart. */
export function callSlot(key: CallKey): string {
  return JSON.stringify([key.name, key.args, key.n]);
}

export type RecalledCall =
  /** It finished: `result` is what the model was given, `turn` the turn state it changed. */
  | { state: "done"; result: string; turn: Partial<TurnState> }
  /** It started and never finished: the process died while it ran. */
  | { state: "started" };

/** The recorded calls of one turn. */
export interface TurnCallRecord {
  recall(key: CallKey): RecalledCall | undefined;
  /**
   * Marks the call started; it runs once this returns (or resolves). A journal whose record must be
   * durable first (the database) resolves after the write, to undefined when this run now holds
   * the call or to what is recorded when another run of the same turn got there first; it rejects
   * when the write failed, and the call then does not run. The file journal returns at once and
   * never throws (a failed write is logged and the call runs: see daemon/tool-journal.ts).
   */
  started(key: CallKey): void | Promise<RecalledCall | undefined>;
  /** Records the result; never throws (a failed write leaves the call "started": a replay does not run it). */
  done(key: CallKey, result: string, turn: Partial<TurnState>): void | Promise<void>;
}

/** What the loop needs from the tool-call journal (the gateway fills it). */
export interface ToolCallJournal {
  /**
   * The record of this message's turn; undefined when nothing would ever replay it. A journal that
   * loads the record (the database) resolves once it has, and rejects when it cannot: the turn then
   * fails rather than repeat calls it cannot see.
   */
  forTurn(msg: InboundMessage): TurnCallRecord | undefined | Promise<TurnCallRecord | undefined>;
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

/** What the model is told for a call whose start could not be recorded (the database failed). */
export function notRecordedText(name: string): string {
  return (
    `Error: this ${name} call was not run: the assistant could not record it first, so a retry of ` +
    `this turn could have repeated it. Nothing was changed. Try again in a minute.`
  );
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
  if (earlier) return recalled(earlier, key, turn, replayNote);
  const instead = before ? await before() : null;
  const stateBefore = { ...turn };
  let claimed: RecalledCall | undefined;
  try {
    claimed = (await record.started(key)) ?? undefined;
  } catch {
    // Only a journal that must record first throws (and has logged why): better not done than twice.
    return notRecordedText(key.name);
  }
  // Another run of this turn (on another instance) started the same call meanwhile.
  if (claimed) return recalled(claimed, key, turn, replayNote);
  // Stopped while the start was being recorded: like a call cut off as it began, it stays "started".
  signal.throwIfAborted();
  // A throw here is an abort (the registry turns tool errors into text): the call stays "started".
  const result = instead ?? (await run());
  // Aborted by shutdown, the turn is replayed at the next start; what the call did before it was
  // killed is unknown (exec reports "stopped"), so the replay is told just that.
  if (!signal.aborted) await record.done(key, result, changedState(stateBefore, turn));
  return result;
}

/** The result of a call an earlier run recorded, as the model is given it. */
function recalled(earlier: RecalledCall, key: CallKey, turn: TurnState, replayNote?: string): string {
  if (earlier.state === "started") return interruptedText(key.name);
  // E.g. the message tool already wrote to the turn's chat: the replay must not reply again.
  Object.assign(turn, earlier.turn);
  const failed = earlier.result.startsWith("Error:");
  return replayNote && !failed ? `${earlier.result}\n\n${replayNote}` : earlier.result;
}

function changedState(before: TurnState, after: TurnState): Partial<TurnState> {
  const changed: Partial<Record<keyof TurnState, unknown>> = {};
  for (const key of Object.keys(after) as (keyof TurnState)[]) {
    if (after[key] !== before[key]) changed[key] = after[key];
  }
  return changed as Partial<TurnState>;
}
