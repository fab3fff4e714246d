/**
 * What is happening in each conversation now, so a tab that opens (or reloads) mid-turn sees it:
 * the running turn, its text so far and the questions still open. History covers the rest.
 */
import { BoundedMap } from "../../util/bounded-map.js";
import type { WebEvent, WebEventType } from "./protocol.js";

type Ev<T extends WebEventType> = Extract<WebEvent, { type: T }>;

interface Now {
  turnId?: string;
  delta?: Ev<"delta">;
  questions: Map<string, Ev<"question">>;
}

export class LiveState {
  /** Bounded: a conversation nobody looks at any more is forgotten. */
  private readonly now = new BoundedMap<string, Now>(1000);
  /** Which conversation a question is in, for the answer (POST /api/questions/:id). */
  private readonly questionChats = new BoundedMap<string, string>(1000);

  see(event: Exclude<WebEvent, { type: "ping" }>): void {
    const id = event.conversationId;
    const now: Now = this.now.get(id) ?? { questions: new Map() };
    switch (event.type) {
      case "turnStart":
        now.turnId = event.turnId;
        now.delta = undefined;
        break;
      case "turnEnd":
        if (now.turnId === event.turnId) now.turnId = undefined;
        now.delta = undefined;
        break;
      case "delta":
        now.delta = event;
        break;
      case "final":
      case "progress":
        now.delta = undefined;
        break;
      case "question":
        now.questions.set(event.questionId, event);
        this.questionChats.set(event.questionId, id);
        break;
      case "questionClosed":
        now.questions.delete(event.questionId);
        break;
      case "toolHint":
      case "user":
        break;
    }
    this.now.set(id, now);
  }

  busy(conversationId: string): boolean {
    return this.now.get(conversationId)?.turnId !== undefined;
  }

  conversationOfQuestion(questionId: string): string | undefined {
    return this.questionChats.get(questionId);
  }

  /** The events a tab joining now needs: the running turn, its text so far, open questions. */
  replay(conversationId: string): WebEvent[] {
    const now = this.now.get(conversationId);
    if (!now) return [];
    const out: WebEvent[] = [];
    if (now.turnId) out.push({ type: "turnStart", conversationId, turnId: now.turnId });
    if (now.delta) out.push(now.delta);
    out.push(...now.questions.values());
    return out;
  }
}
