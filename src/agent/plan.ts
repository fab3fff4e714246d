/**
 * The plan the model keeps with todo_write: its items in the session's metadata (nanobot ignores
 * keys it does not know), the one reminder line every LLM call carries while items are open, the
 * checklist shown to the user, and plan churn (the same plan written again and again). Pure.
 */
import type { ChatMessage } from "../llm/types.js";
import { isRuntimeContextMessage } from "./context.js";

export type PlanStatus = "pending" | "in_progress" | "done";

export interface PlanItem {
  id: string;
  text: string;
  status: PlanStatus;
}

export interface Plan {
  items: PlanItem[];
  /** How many times in a row the same plan was written without a status changing. */
  repeats: number;
}

/** The session metadata key the plan lives under. */
export const PLAN_METADATA_KEY = "palaver_plan";

/** Writing the same plan this many times in a row is answered with a note to act instead. */
export const PLAN_CHURN_REPEATS = 3;

const STATUSES = new Set<string>(["pending", "in_progress", "done"]);

/** The plan kept in a session's metadata; an empty one when there is none or it is malformed. */
export function planOf(metadata: Record<string, unknown>): Plan {
  const raw = metadata[PLAN_METADATA_KEY];
  if (!raw || typeof raw !== "object") return { items: [], repeats: 0 };
  const { items, repeats } = raw as { items?: unknown; repeats?: unknown };
  const valid = Array.isArray(items)
    ? items.filter(
        (i): i is PlanItem =>
          !!i &&
          typeof i === "object" &&
          typeof (i as PlanItem).id === "string" &&
          typeof (i as PlanItem).text === "string" &&
          STATUSES.has((i as PlanItem).status),
      )
    : [];
  return { items: valid, repeats: typeof repeats === "number" ? repeats : 0 };
}

/** Drops the plan (/new: it belonged to the conversation that ended). */
export function forgetPlan(metadata: Record<string, unknown>): void {
  delete metadata[PLAN_METADATA_KEY];
}

/** The plan after a todo_write: ids given to new items, and the repeat count carried on or reset. */
export function writePlan(
  previous: Plan,
  items: readonly { id?: string | undefined; text: string; status: PlanStatus }[],
): Plan {
  const next = items.map((item, i) => ({
    id: item.id?.trim() || String(i + 1),
    text: item.text.trim(),
    status: item.status,
  }));
  const same = samePlan(previous.items, next);
  return { items: next, repeats: same ? Math.max(previous.repeats, 1) + 1 : 1 };
}

function samePlan(a: readonly PlanItem[], b: readonly PlanItem[]): boolean {
  return (
    a.length > 0 &&
    a.length === b.length &&
    a.every((x, i) => x.text === b[i]!.text && x.status === b[i]!.status)
  );
}

export function isChurning(plan: Plan): boolean {
  return plan.repeats >= PLAN_CHURN_REPEATS;
}

/** "Now: …; next: …; N more" while items are open; null when none is. */
export function planReminder(items: readonly PlanItem[]): string | null {
  const open = items.filter((i) => i.status !== "done");
  if (open.length === 0) return null;
  const now = open.find((i) => i.status === "in_progress");
  const pending = open.filter((i) => i !== now);
  const parts = [`Now: ${now ? now.text : "(nothing in progress)"}`];
  if (pending[0]) parts.push(`next: ${pending[0].text}`);
  const more = pending.length - 1;
  if (more > 0) parts.push(`${more} more`);
  return `Plan (todo_read for all): ${parts.join("; ")}`;
}

/** The plan as a checklist for the user and for todo_read. */
export function formatChecklist(items: readonly PlanItem[]): string {
  const mark: Record<PlanStatus, string> = { done: "☑", in_progress: "▶", pending: "☐" };
  return items.map((i) => `${mark[i.status]} ${i.text}`).join("\n");
}

/**
 * The prompt with the reminder line added to its runtime context message (the last one): a copy,
 * so nothing of it reaches the session. Unchanged when there is no reminder.
 */
export function withPlanReminder(
  messages: readonly ChatMessage[],
  items: readonly PlanItem[],
): ChatMessage[] {
  const line = planReminder(items);
  const copy = [...messages];
  if (line === null) return copy;
  for (let i = copy.length - 1; i >= 0; i--) {
    const msg = copy[i]!;
    if (!isRuntimeContextMessage(msg)) continue;
    copy[i] = { ...msg, content: `${msg.content as string}\n${line}` };
    break;
  }
  return copy;
}
