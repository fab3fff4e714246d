/**
 * `/usage` in a chat: this conversation today and this month; an owner also sees the whole bot
 * this month, by kind and by model.
 */
import type { InboundMessage } from "../bus/types.js";
import type { UsageLedger } from "./ledger.js";
import type { UsageEntry } from "./record.js";
import { dayOf, formatSum, groupUsage, monthOf, sumOf } from "./summary.js";

export interface UsageCommandOptions {
  ledger: UsageLedger;
  /** Whether the sender may see the whole bot (allowFrom or admins of the channel). */
  isOwner: (msg: InboundMessage) => boolean;
  now?: () => Date;
}

export function usageReply(msg: InboundMessage, session: string, opts: UsageCommandOptions): string {
  const now = opts.now?.() ?? new Date();
  const entries = opts.ledger.read();
  return usageText(entries, session, opts.isOwner(msg), now);
}

/** Pure: the reply from the ledger's entries. */
export function usageText(
  entries: readonly UsageEntry[],
  session: string,
  owner: boolean,
  now: Date,
): string {
  const today = dayOf(now);
  const month = monthOf(now);
  const thisMonth = entries.filter((e) => monthOf(e.time) === month);
  const mine = thisMonth.filter((e) => e.session === session);
  const lines = [
    "Usage of this conversation:",
    `  today: ${formatSum(sumOf(mine.filter((e) => dayOf(e.time) === today)))}`,
    `  this month: ${formatSum(sumOf(mine))}`,
  ];
  if (owner) {
    lines.push("", `Whole bot this month: ${formatSum(sumOf(thisMonth))}`);
    for (const row of groupUsage(thisMonth, "kind")) lines.push(`  ${row.key}: ${formatSum(row)}`);
    lines.push("By model:");
    for (const row of groupUsage(thisMonth, "model")) lines.push(`  ${row.key}: ${formatSum(row)}`);
  }
  return lines.join("\n");
}
