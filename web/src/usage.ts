/**
 * The usage panel: a dialog that asks GET /api/usage for the conversation shown and lists what
 * /usage would say (this conversation today and this month; the whole bot, by kind and by model,
 * for an owner). Built from text nodes only.
 */
import type { UsageFigures, UsageGroupFigures, UsageView } from "../../src/channels/web/protocol.js";
import { h } from "./dom.js";

function pairs(rows: [string, UsageFigures][]): HTMLDListElement {
  return h("dl", {}, ...rows.flatMap(([label, sum]) => [h("dt", {}, label), h("dd", {}, sum.text)]));
}

const grouped = (rows: UsageGroupFigures[]): [string, UsageFigures][] => rows.map((r) => [r.key, r]);

/** Pure DOM: the panel's content for a view. */
export function renderUsage(view: UsageView): Node[] {
  const nodes: Node[] = [
    h("h3", {}, "This conversation"),
    pairs([
      ["Today", view.conversation.today],
      ["This month", view.conversation.month],
    ]),
  ];
  if (view.bot) {
    nodes.push(
      h("h3", {}, "Whole bot this month"),
      pairs([["All", view.bot.month], ...grouped(view.bot.byKind)]),
    );
    if (view.bot.byModel.length) nodes.push(h("h3", {}, "By model"), pairs(grouped(view.bot.byModel)));
  }
  return nodes;
}
