/**
 * `palaver usage [--by chat|model|kind|agent|day] [--since 2026-11-01] [--json]`: what the LLM calls
 * cost, from the usage ledger in the state folder. Reads only; works while the gateway runs.
 */
import type { Command } from "commander";
import { stateDir } from "../config/paths.js";
import { UsageLedger, usageLedgerPath } from "../usage/ledger.js";
import {
  entriesSince,
  formatSum,
  groupUsage,
  sumOf,
  USAGE_GROUPINGS,
  type UsageGrouping,
  type UsageRow,
  type UsageSum,
} from "../usage/summary.js";
import { guarded, loadForCli } from "./common.js";

interface UsageOptions {
  by: string;
  since?: string;
  json?: boolean;
}

export function registerUsageCommand(program: Command): void {
  const usage = program
    .command("usage")
    .description("tokens and cost of the LLM calls, by chat, model, kind of work, agent or day")
    .option("--by <grouping>", `group by ${USAGE_GROUPINGS.join(", ")}`, "kind")
    .option("--since <date>", "only calls on or after this day (YYYY-MM-DD, local time)")
    .option("--json", "print the groups and the total as JSON")
    .action((opts: UsageOptions) =>
      guarded(() => {
        const by = groupingOf(opts.by);
        if (opts.since !== undefined && !/^\d{4}-\d{2}-\d{2}$/.test(opts.since)) {
          throw new Error(`--since ${opts.since}: expected a day like 2026-11-01`);
        }
        const loaded = loadForCli(usage, { level: "warn" });
        const ledger = new UsageLedger(usageLedgerPath(stateDir(loaded.path)));
        const entries = entriesSince(ledger.read(), opts.since);
        const rows = groupUsage(entries, by);
        const total = sumOf(entries);
        if (opts.json) {
          process.stdout.write(
            `${JSON.stringify({ by, since: opts.since ?? null, rows, total }, null, 2)}\n`,
          );
        } else {
          process.stdout.write(`${formatUsage(rows, by, total)}\n`);
        }
      }),
    );
}

function groupingOf(text: string): UsageGrouping {
  const by = USAGE_GROUPINGS.find((g) => g === text);
  if (!by) throw new Error(`--by ${text}: expected one of ${USAGE_GROUPINGS.join(", ")}`);
  return by;
}

/** Pure: the table `palaver usage` prints. */
function formatUsage(rows: readonly UsageRow[], by: UsageGrouping, total: UsageSum): string {
  if (rows.length === 0) return "No LLM calls recorded yet.";
  const width = Math.max(...rows.map((r) => r.key.length), by.length);
  return [
    ...rows.map((row) => `${row.key.padEnd(width)}  ${formatSum(row)}`),
    "",
    `${"total".padEnd(width)}  ${formatSum(total)}`,
  ].join("\n");
}
