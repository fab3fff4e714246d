/**
 * The plan in the web chat, against a real gateway and the fake LLM: todo_write's checklist comes
 * to every tab as `plan` events of the turn (the page rewrites one checklist block with each), a
 * tab opened mid-turn gets the plan as it stands, the last one shows every item done, and the
 * plan is neither the turn's reply nor in the conversation's history.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { HistoryMessage, WebEvent } from "../../../src/channels/web/protocol.js";
import { toolCall } from "../../fakes/openai-server.js";
import { waitFor } from "../../helpers/wait.js";
import { WebRig } from "./harness.js";

let rig: WebRig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

const STEPS = ["Fetch the page", "Summarise it"];
const write = (done: number) =>
  toolCall("todo_write", {
    items: STEPS.map((text, i) => ({
      text,
      status: i < done ? "done" : i === done ? "in_progress" : "pending",
    })),
  });
const checklistOf = (done: number) =>
  STEPS.map((text, i) => `${i < done ? "☑" : i === done ? "▶" : "☐"} ${text}`).join("\n");

const plans = (events: WebEvent[]) =>
  events.filter((e): e is Extract<WebEvent, { type: "plan" }> => e.type === "plan");

describe("the plan in the web chat", () => {
  it("comes as plan events of the turn, replayed to a late tab, and ends all done", async () => {
    rig = await WebRig.start();
    const tab = await rig.subscribe("p");
    // The second tab, opened mid-turn.
    const opened: { late?: WebEvent[] } = {};
    let call = 0;
    rig.fake.setHandler(async () => {
      call++;
      if (call === 1) return { toolCalls: [write(0)] };
      if (call === 2) {
        await waitFor(() => plans(tab).some((e) => e.text === checklistOf(0)), undefined, "the first plan");
        return { toolCalls: [write(1)] };
      }
      if (call === 3) {
        // The test opens a second tab once the second plan showed: it must see that plan too.
        await waitFor(() => plans(opened.late ?? []).length > 0, undefined, "the late tab's plan");
        return { toolCalls: [write(2)] };
      }
      return { content: "Here is the summary." };
    });
    await rig.post("/api/conversations/p/messages", { text: "summarise example.org" }, rig.bearer());
    await rig.waitForEvent(tab, "plan", (e) => e.text === checklistOf(1));
    const late = await rig.subscribe("p");
    opened.late = late;

    await rig.waitForEvent(tab, "final", (e) => e.text === "Here is the summary.");
    await rig.waitForEvent(tab, "plan", (e) => e.text === checklistOf(2));
    const turnId = (await rig.waitForEvent(tab, "turnStart")).turnId;
    expect(plans(tab).every((e) => e.turnId === turnId && e.conversationId === "p")).toBe(true);
    // Each state in order (the same text may come twice: the turn's end writes the last one again).
    const texts = plans(tab).map((e) => e.text);
    expect([...new Set(texts)]).toEqual([checklistOf(0), checklistOf(1), checklistOf(2)]);
    expect(texts.at(-1)).toBe(checklistOf(2));
    expect(plans(late)[0]).toMatchObject({ type: "plan", turnId, text: checklistOf(1) });
    // Not a reply: one final, the answer, and no checklist in the history.
    const finals = tab.filter((e) => e.type === "final");
    expect(finals).toHaveLength(1);
    await rig.gateway.agent.sessions.flush();
    const history = await rig.request("/api/conversations/p/messages", { headers: rig.bearer() });
    expect(history.json<HistoryMessage[]>().map((m) => m.content)).toEqual([
      "summarise example.org",
      "Here is the summary.",
    ]);
  });
});
