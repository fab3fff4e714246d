/**
 * The usage ledger, `<state>/usage/usage.jsonl`: one line per LLM call, only ever appended, so a
 * backup or `palaver usage` can read it while the gateway writes (a torn last line is skipped and
 * kept aside by readJsonl). Synchronous appends like the message journal: a line is on disk before
 * the call's turn goes on, and a failing disk is logged, never thrown into a turn.
 */
import { appendFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { logger } from "../log.js";
import { readJsonl } from "../util/jsonl.js";
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from "../util/private-fs.js";
import { UsageEntrySchema, type UsageEntry } from "./record.js";

/** Where the ledger of the state folder `stateDir` lives. */
export function usageLedgerPath(stateDir: string): string {
  return join(stateDir, "usage", "usage.jsonl");
}

export class UsageLedger {
  private readonly log = logger("usage");
  private failing = false;

  constructor(readonly path: string) {}

  append(entry: UsageEntry): void {
    try {
      mkdirSync(dirname(this.path), { recursive: true, mode: PRIVATE_DIR_MODE });
      appendFileSync(this.path, `${JSON.stringify(entry)}\n`, { mode: PRIVATE_FILE_MODE });
      this.failing = false;
    } catch (err) {
      // Logged once per failing spell: a full disk must not flood the log on every call.
      if (!this.failing) this.log.error({ err, path: this.path }, "could not write the usage ledger");
      this.failing = true;
    }
  }

  /** Every call recorded (bad lines skipped and kept in usage.jsonl.corrupt), oldest first. */
  read(): UsageEntry[] {
    return readJsonl(this.path, UsageEntrySchema, { log: this.log, what: "usage ledger" }).values;
  }
}
