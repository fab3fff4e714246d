/**
 * The usage panel's figures: the report /usage is made from (usage/command.ts), each sum with the
 * words /usage uses for it (usage/summary.ts), so the page and the chat command always agree.
 */
import type { UsageReport } from "../../usage/command.js";
import { formatSum, type UsageRow, type UsageSum } from "../../usage/summary.js";
import type { UsageFigures, UsageGroupFigures, UsageView } from "./protocol.js";

const figures = (sum: UsageSum): UsageFigures => ({ ...sum, text: formatSum(sum) });
const rows = (list: readonly UsageRow[]): UsageGroupFigures[] =>
  list.map((row) => ({ ...row, text: formatSum(row) }));

/** Pure: the panel's view of a report. */
export function usageViewOf(report: UsageReport): UsageView {
  return {
    conversation: { today: figures(report.today), month: figures(report.month) },
    ...(report.bot
      ? {
          bot: {
            month: figures(report.bot.month),
            byKind: rows(report.bot.byKind),
            byModel: rows(report.bot.byModel),
          },
        }
      : {}),
  };
}
