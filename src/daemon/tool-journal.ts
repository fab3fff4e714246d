/**
 * The tool-call journal: `<state>/journal/tools.jsonl`, beside the message
 * journal. While a journaled message's turn runs, each side-effecting tool
 * call is appended before it runs ("start") and with the result the model got
 * after ("done"). When that turn ends the record is dropped ("end"); if the
 * process dies first, the message journal replays the message at the next
 * start and the replayed turn reuses these results (agent/tool-replay.ts), so
 * a message is not sent, a command not run and a job not added twice.
 *
 * Bounded: only turns still pending in the message journal are kept, and the
 * file is rewritten with just those at open and after `compactEvery` appends.
 * Lines are validated on read; a bad one is skipped with a warning and kept
 * in `tools.jsonl.corrupt`. A write that fails (disk full, read-only) is
 * logged once per episode and the call runs anyway: answering matters more
 * than this record, which only helps if the process also crashes meanwhile.
 *
 * To remove: drop it from gateway.ts; the agent then runs every call again on replay.
 */
import { closeSync, mkdirSync, openSync, renameSync, writeFileSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import * as z from "zod";
import {
  callSlot,
  type CallKey,
  type RecalledCall,
  type ToolCallJournal,
  type TurnCallRecord,
} from "../agent/tool-replay.js";
import type { TurnState } from "../agent/tools/types.js";
import type { InboundMessage } from "../bus/types.js";
import { logger, type Logger } from "../log.js";
import { readJsonl } from "../util/jsonl.js";

const CallFields = {
  /** The journal id of the turn's inbound message. */
  turn: z.string().min(1),
  name: z.string().min(1),
  args: z.string(),
  n: z.number().int().positive(),
};
const TurnStateChange = z
  .object({
    sentToOriginChat: z.boolean(),
    untrusted: z.array(z.object({ tool: z.string(), source: z.string() })),
  })
  .partial() satisfies z.ZodType<Partial<TurnState>>;

const Entry = z.discriminatedUnion("t", [
  z.object({ t: z.literal("start"), ...CallFields }),
  z.object({
    t: z.literal("done"),
    ...CallFields,
    result: z.string(),
    turnState: TurnStateChange.optional(),
  }),
  z.object({ t: z.literal("end"), turn: z.string().min(1) }),
]);
type Entry = z.infer<typeof Entry>;

export interface ToolJournalOptions {
  log?: Logger;
  /** Appended lines after which the file is compacted. */
  compactEvery?: number;
}

/** The file journal's record of a turn: every write is synchronous (and never throws). */
interface FileTurnRecord extends TurnCallRecord {
  started(key: CallKey): void;
  done(key: CallKey, result: string, turn: Partial<TurnState>): void;
}

export class ToolJournal implements ToolCallJournal {
  private fd: number | null = null;
  /** Turn id → call slot (see callSlot) → what is known about that call. */
  private readonly turns = new Map<string, Map<string, RecalledCall>>();
  private appended = 0;
  /** Set while writes fail, so a full disk is logged once, not once per call. */
  private failing = false;
  private readonly log: Logger;
  private readonly compactEvery: number;

  constructor(
    readonly path: string,
    opts: ToolJournalOptions = {},
  ) {
    this.log = opts.log ?? logger("tool-journal");
    this.compactEvery = opts.compactEvery ?? 1_000;
  }

  /**
   * Reads what an earlier run left, keeps only the turns that will be replayed
   * (`pendingTurns`: the message journal's unfinished inbound ids) and compacts.
   */
  open(pendingTurns: Iterable<string>): void {
    mkdirSync(dirname(this.path), { recursive: true, mode: 0o700 });
    this.guard("read its file", () => {
      const { values } = readJsonl(this.path, Entry, { log: this.log, what: "tool journal" });
      for (const entry of values) this.apply(entry);
    });
    const keep = new Set(pendingTurns);
    for (const turn of this.turns.keys()) if (!keep.has(turn)) this.turns.delete(turn);
    this.compact();
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }

  /** Turns with recorded calls (for tests and diagnostics). */
  get size(): number {
    return this.turns.size;
  }

  forTurn(msg: InboundMessage): FileTurnRecord | undefined {
    const turn = msg.journalId;
    if (!turn) return undefined;
    return {
      recall: (key) => this.turns.get(turn)?.get(callSlot(key)),
      started: (key) => this.record({ t: "start", turn, ...key }),
      done: (key, result, turnState) => this.record(doneEntry(turn, key, result, turnState)),
    };
  }

  /** The turn has ended and its message is marked done: its calls will never be replayed. */
  endTurn(turn: string): void {
    if (!this.turns.delete(turn)) return;
    this.append({ t: "end", turn });
    if (this.appended >= this.compactEvery) this.compact();
  }

  private record(entry: Entry): void {
    this.apply(entry);
    this.append(entry);
  }

  private apply(entry: Entry): void {
    if (entry.t === "end") {
      this.turns.delete(entry.turn);
      return;
    }
    let calls = this.turns.get(entry.turn);
    if (!calls) this.turns.set(entry.turn, (calls = new Map<string, RecalledCall>()));
    calls.set(
      callSlot(entry),
      entry.t === "done"
        ? { state: "done", result: entry.result, turn: entry.turnState ?? {} }
        : { state: "started" },
    );
  }

  private append(entry: Entry): void {
    this.guard("record a tool call", () => {
      this.fd ??= openSync(this.path, "a", 0o600);
      writeSync(this.fd, `${JSON.stringify(entry)}\n`);
      this.appended++;
    });
  }

  /** Rewrites the file with the calls of the turns still open (temp file + rename: a crash keeps the old one). */
  private compact(): void {
    const lines: string[] = [];
    for (const [turn, calls] of this.turns) {
      for (const [slot, call] of calls) {
        const key = keyOf(slot);
        const entry: Entry =
          call.state === "done" ? doneEntry(turn, key, call.result, call.turn) : { t: "start", turn, ...key };
        lines.push(JSON.stringify(entry));
      }
    }
    this.guard("compact", () => {
      const temp = `${this.path}.tmp`;
      writeFileSync(temp, lines.length ? `${lines.join("\n")}\n` : "", { mode: 0o600 });
      this.close();
      renameSync(temp, this.path);
      this.appended = 0;
    });
  }

  /** Runs a write; a failure is logged at the start of an episode and otherwise ignored (see the header). */
  private guard(what: string, write: () => void): void {
    try {
      write();
      if (this.failing) this.log.info({ file: this.path }, "tool journal: recording tool calls works again");
      this.failing = false;
    } catch (err) {
      if (!this.failing) {
        this.log.warn(
          { err, file: this.path },
          `tool journal: could not ${what}; until writing works again, a crash may repeat tool calls on replay`,
        );
      }
      this.failing = true;
    }
  }
}

function doneEntry(turn: string, key: CallKey, result: string, turnState: Partial<TurnState>): Entry {
  return { t: "done", turn, ...key, result, ...(Object.keys(turnState).length ? { turnState } : {}) };
}

function keyOf(slot: string): CallKey {
  const [name, args, n] = JSON.parse(slot) as [string, string, number];
  return { name, args, n };
}
