/**
 * The usage panel's figures: the report /usage is made from (usage/command.ts), each sum with the
 * words /usage uses for it (usage/summary.ts), so the page and the chat command always agree.
 */
import type { UsageReport } from "../../usage/command.js";
import { formatSum, type UsageSum } from "../../usage/summary.js";
import type { UsageView } from "./protocol.js";

/** A sum (or a row of one group) with the words /usage says it in. */
const figures = <T extends UsageSum>(sum: T): T & { text: string } => ({ ...sum, text: formatSum(sum) });

/** Pure: the panel's view of a report. */
export function usageViewOf(report: UsageReport): UsageView {
  return {
    conversation: { today: figures(report.today), month: figures(report.month) },
    ...(report.bot
      ? {
          bot: {
            month: figures(report.bot.month),
            byKind: report.bot.byKind.map(figures),
            byModel: report.bot.byModel.map(figures),
          },
        }
      : {}),
  };
}
