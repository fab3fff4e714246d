/**
 * The checklist message of each running turn (todo_write's plan, OutboundMessage kind "plan"): one
 * message of its own, posted with the first checklist and edited in place as items change, at most
 * once per interval and always with the newest checklist (the LivePreview engine paces it, as it
 * paces streamed replies), and finished with the last checklist when the turn ends, where it
 * stays. A chat without such a message (no plan surface) gets each changed checklist as a message
 * of its own. Nothing here is journaled: a checklist is worth nothing after a restart, and it is
 * never the turn's reply.
 */
import { BoundedMap } from "../util/bounded-map.js";
import type { LivePreview } from "./live-preview.js";

interface TurnPlan {
  /** Undefined: the chat has no plan surface, each change is sent as a message. */
  message: LivePreview | undefined;
  /** The newest checklist. */
  latest: string;
}

/** What became of a checklist: on its way to the turn's message, to be sent as one, or nothing new. */
export type PlanShown = "edited" | "send" | "unchanged";

export class TurnPlans {
  private readonly open = new Map<string, TurnPlan>();
  private readonly ended = new BoundedMap<string, true>(1000);

  /**
   * The turn's newest checklist. `make` gives the turn's message on its first checklist (undefined:
   * none in this chat). "unchanged" for the checklist already shown and for a turn that ended.
   */
  show(turnId: string, checklist: string, make: () => LivePreview | undefined): PlanShown {
    if (this.ended.has(turnId)) return "unchanged";
    let plan = this.open.get(turnId);
    if (plan?.latest === checklist) return "unchanged";
    if (plan) plan.latest = checklist;
    else {
      plan = { message: make(), latest: checklist };
      this.open.set(turnId, plan);
    }
    if (!plan.message) return "send";
    plan.message.update(checklist);
    return "edited";
  }

  /**
   * The turn ended: its message, if it has one, with the checklist to finish it with. Checklists of
   * the turn that come later are "unchanged".
   */
  end(turnId: string): { message: LivePreview; checklist: string } | undefined {
    this.ended.set(turnId, true);
    const plan = this.open.get(turnId);
    this.open.delete(turnId);
    return plan?.message ? { message: plan.message, checklist: plan.latest } : undefined;
  }
}
