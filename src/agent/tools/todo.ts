/**
 * todo_write and todo_read: the plan the model keeps for a task of several steps, stored in the
 * session's metadata (agent/plan.ts), so it outlives the turn and a restart. The same plan
 * written again without progress is answered with a note to act instead (plan churn). Each plan
 * written in a turn is published as the turn's checklist (kind "plan"), which the chat shows as one
 * message edited in place when it changes (channels/turn-plans.ts).
 */
import * as z from "zod";
import { replyPlaceOf } from "../../bus/types.js";
import type { Session } from "../../sessions/session.js";
import { formatChecklist, isChurning, planOf, PLAN_METADATA_KEY, writePlan, type Plan } from "../plan.js";
import { defineTool, type Tool, type ToolContext } from "./types.js";

/** Where the plans live: the session store (one shared Session per key). */
export interface PlanSessions {
  get(key: string): Promise<Session>;
  saveMetadata(session: Session): Promise<void>;
}

export function createTodoTools(sessions: PlanSessions): Tool[] {
  const write = defineTool({
    name: "todo_write",
    // It changes only this conversation's own plan: never worth an approval question, and writing
    // the same plan again when a turn is replayed after a crash is harmless.
    readOnly: true,
    description:
      "Write your plan for a task of several steps as a checklist the user sees. Send the whole list each " +
      "time; mark one item in_progress while you work on it and done when it is. Skip it for simple requests.",
    parameters: z.object({
      items: z
        .array(
          z.object({
            id: z.string().optional(),
            text: z.string().min(1),
            status: z.enum(["pending", "in_progress", "done"]),
          }),
        )
        .max(50),
    }),
    async execute({ items }, ctx) {
      const session = await sessions.get(ctx.sessionKey);
      const plan = writePlan(planOf(session.metadata), items);
      session.metadata[PLAN_METADATA_KEY] = plan;
      await sessions.saveMetadata(session);
      showChecklist(plan, ctx);
      if (isChurning(plan)) {
        return (
          `You have written this same plan ${plan.repeats} times without a step changing. Stop planning: ` +
          "do the item in progress now with your other tools, then mark it done."
        );
      }
      const open = plan.items.filter((i) => i.status !== "done").length;
      return `Plan saved (${open} of ${plan.items.length} open):\n${formatChecklist(plan.items)}`;
    },
  });
  const read = defineTool({
    name: "todo_read",
    readOnly: true,
    description: "Read your current plan (the checklist written with todo_write).",
    parameters: z.object({}),
    async execute(_args, ctx) {
      const plan = planOf((await sessions.get(ctx.sessionKey)).metadata);
      return plan.items.length ? formatChecklist(plan.items) : "No plan yet.";
    },
  });
  return [write, read];
}

/**
 * Publishes the turn's checklist (the channel manager shows only what changed). Not a reply: it
 * sets nothing on the turn, and the manager never journals it. An empty plan leaves the message
 * as it was.
 */
function showChecklist(plan: Plan, ctx: ToolContext): void {
  const checklist = formatChecklist(plan.items);
  if (!ctx.turnId || !checklist) return;
  ctx.publish({
    channel: ctx.channel,
    chatId: ctx.chatId,
    content: checklist,
    kind: "plan",
    turnId: ctx.turnId,
    ...replyPlaceOf(ctx),
    ...(ctx.metadata ? { metadata: ctx.metadata } : {}),
  });
}
