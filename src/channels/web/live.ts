/**
 * What is happening in each conversation now, so a tab that opens (or reloads) mid-turn sees it:
 * the running turn with the message it answers (the session file gets both when the turn ends),
 * its plan and its text so far, messages still queued and the questions still open. History covers the rest.
 */
import { parseCommand } from "../../bus/commands.js";
import { BoundedMap } from "../../util/bounded-map.js";
import type { WebEvent, WebEventType } from "./protocol.js";

type Ev<T extends WebEventType> = Extract<WebEvent, { type: T }>;

/** Messages kept per conversation while they wait for their turn. */
const MAX_PENDING = 20;

interface Now {
  turnId?: string;
  /** The running turn's events come from another instance of the cluster (web/relay.ts). */
  remote?: boolean;
  /** The message the running turn answers. */
  asked?: Ev<"user">;
  /** Messages sent and not yet answered, oldest first: each turn takes the first. */
  pending: Ev<"user">[];
  delta?: Ev<"delta">;
  /** The running turn's plan as it stands. */
  plan?: Ev<"plan">;
  questions: Map<string, Ev<"question">>;
}

export class LiveState {
  /** Bounded: a conversation nobody looks at any more is forgotten. */
  private readonly now = new BoundedMap<string, Now>(1000);
  /** Which conversation a question is in, for the answer (POST /api/questions/:id). */
  private readonly questionChats = new BoundedMap<string, string>(1000);

  /**
   * Takes note of an event; `background`: a turnStart of cron or a subagent, which answers no
   * message; `remote`: relayed from another instance.
   */
  see(event: Exclude<WebEvent, { type: "ping" }>, background = false, remote = false): void {
    const id = event.conversationId;
    const now: Now = this.now.get(id) ?? { pending: [], questions: new Map() };
    switch (event.type) {
      case "turnStart":
        now.turnId = event.turnId;
        now.remote = remote;
        now.asked = background ? undefined : now.pending.shift();
        now.delta = undefined;
        now.plan = undefined;
        break;
      case "turnEnd":
        if (now.turnId === event.turnId) now.turnId = undefined;
        now.asked = undefined;
        now.delta = undefined;
        now.plan = undefined;
        break;
      case "plan":
        if (now.turnId === event.turnId) now.plan = event;
        break;
      case "user":
        // No turn of its own: /stop, and a message typed while a question is open (its answer).
        if (now.questions.size === 0 && parseCommand(event.text)?.name !== "stop") {
          now.pending = [...now.pending, event].slice(-MAX_PENDING);
        }
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
        break;
    }
    this.now.set(id, now);
  }

  /**
   * Forgets the turns running on other instances: the relay lost events, so their end may never
   * come. Their later events still reach the tabs; open questions stay (a stale one's button
   * answers "no longer open").
   */
  forgetRemoteTurns(): void {
    for (const id of [...this.now.keys()]) {
      const now = this.now.get(id);
      if (!now?.remote) continue;
      now.turnId = undefined;
      now.remote = undefined;
      now.asked = undefined;
      now.delta = undefined;
      now.plan = undefined;
    }
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
    if (now.asked) out.push(now.asked);
    if (now.turnId) out.push({ type: "turnStart", conversationId, turnId: now.turnId });
    if (now.plan) out.push(now.plan);
    if (now.delta) out.push(now.delta);
    out.push(...now.questions.values(), ...now.pending);
    return out;
  }
}
