/**
 * `/usage` in a chat: this conversation today and this month; an owner also sees the whole bot
 * this month, by kind and by model.
 */
import type { InboundMessage } from "../bus/types.js";
import type { UsageLedger } from "./ledger.js";
import type { UsageEntry } from "./record.js";
import { dayOf, formatSum, groupUsage, monthOf, sumOf, type UsageRow, type UsageSum } from "./summary.js";

/** Who asks for usage: the channel and the sender (owners see the whole bot). */
export type UsageAsker = Pick<InboundMessage, "channel" | "senderId" | "senderAliases">;

export interface UsageCommandOptions {
  ledger: UsageLedger;
  /** Whether the sender may see the whole bot (allowFrom or admins of the channel). */
  isOwner: (msg: UsageAsker) => boolean;
  now?: () => Date;
}

/** What /usage says, as numbers: this conversation today and this month; the whole bot for owners. */
export interface UsageReport {
  today: UsageSum;
  month: UsageSum;
  /** Owners only: the whole bot this month, in all and by kind and by model. */
  bot?: { month: UsageSum; byKind: UsageRow[]; byModel: UsageRow[] };
}

export function usageReply(msg: InboundMessage, session: string, opts: UsageCommandOptions): string {
  return usageText(usageReportFor(msg, session, opts));
}

/** The report for `session` as `asker` may see it, from the ledger as it is now. */
export function usageReportFor(asker: UsageAsker, session: string, opts: UsageCommandOptions): UsageReport {
  const now = opts.now?.() ?? new Date();
  return usageReport(opts.ledger.read(), session, opts.isOwner(asker), now);
}

/** Pure: the report from the ledger's entries. */
function usageReport(
  entries: readonly UsageEntry[],
  session: string,
  owner: boolean,
  now: Date,
): UsageReport {
  const today = dayOf(now);
  const month = monthOf(now);
  const thisMonth = entries.filter((e) => monthOf(e.time) === month);
  const mine = thisMonth.filter((e) => e.session === session);
  return {
    today: sumOf(mine.filter((e) => dayOf(e.time) === today)),
    month: sumOf(mine),
    ...(owner
      ? {
          bot: {
            month: sumOf(thisMonth),
            byKind: groupUsage(thisMonth, "kind"),
            byModel: groupUsage(thisMonth, "model"),
          },
        }
      : {}),
  };
}

/** Pure: the reply's words. */
function usageText(report: UsageReport): string {
  const lines = [
    "Usage of this conversation:",
    `  today: ${formatSum(report.today)}`,
    `  this month: ${formatSum(report.month)}`,
  ];
  if (report.bot) {
    lines.push("", `Whole bot this month: ${formatSum(report.bot.month)}`);
    for (const row of report.bot.byKind) lines.push(`  ${row.key}: ${formatSum(row)}`);
    lines.push("By model:");
    for (const row of report.bot.byModel) lines.push(`  ${row.key}: ${formatSum(row)}`);
  }
  return lines.join("\n");
}
