/**
 * GET /api/usage, the web chat's usage panel: behind the token like the rest of /api/, and the
 * same sums /usage gives, from the fake LLM's usage fields, after real turns through the gateway.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { UsageView } from "../../../src/channels/web/protocol.js";
import { lastUserText } from "../../fakes/openai-server.js";
import { WebRig } from "./harness.js";

let rig: WebRig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

/** Every call: 1000 tokens in (200 cached), 500 out (100 reasoning); $1 / $0.5 cached / $2 per million. */
async function start(extra: Record<string, unknown> = {}): Promise<WebRig> {
  const started = await WebRig.start({
    pricing: { "fake-*": { input: 1, cachedInput: 0.5, output: 2 } },
    ...extra,
  });
  started.fake.setHandler((req) => ({
    content: `re: ${lastUserText(req)}`,
    usage: {
      prompt_tokens: 1000,
      completion_tokens: 500,
      prompt_tokens_details: { cached_tokens: 200 },
      completion_tokens_details: { reasoning_tokens: 100 },
    },
  }));
  return started;
}

/** One turn in conversation `id`, waited for to its end (its call is in the ledger by then). */
async function turn(r: WebRig, id: string, text: string): Promise<void> {
  const tab = await r.subscribe(id);
  const sent = await r.post(`/api/conversations/${id}/messages`, { text }, r.bearer());
  expect(sent.status).toBe(202);
  await r.waitForEvent(tab, "turnEnd", (e) => e.outcome === "done");
}

/** 800 fresh at $1, 200 cached at $0.5, 500 out at $2, per million. */
const CALL_USD = (800 * 1 + 200 * 0.5 + 500 * 2) / 1_000_000;

describe("the web chat's usage panel API", () => {
  it("refuses without the token; with it, sums this conversation and (for the owner) the whole bot", async () => {
    rig = await start();
    expect((await rig.request("/api/usage?conversation=a")).status).toBe(401);
    const wrong = await rig.request("/api/usage?conversation=a", {
      headers: { authorization: "Bearer not-the-token" },
    });
    expect(wrong.status).toBe(401);

    await turn(rig, "a", "one");
    await turn(rig, "a", "two");
    await turn(rig, "b", "three");

    const reply = await rig.request("/api/usage?conversation=a", { headers: await rig.login() });
    expect(reply.status).toBe(200);
    const view = reply.json<UsageView>();
    for (const sum of [view.conversation.today, view.conversation.month]) {
      expect(sum).toMatchObject({
        calls: 2,
        promptTokens: 2000,
        cachedTokens: 400,
        completionTokens: 1000,
        reasoningTokens: 200,
        unpricedCalls: 0,
      });
      expect(sum.costUsd).toBeCloseTo(2 * CALL_USD, 10);
      expect(sum.text).toBe("2 calls, 2000 tokens in (400 cached), 1000 out (200 reasoning), $0.0038");
    }
    expect(view.bot?.month).toMatchObject({ calls: 3, promptTokens: 3000, completionTokens: 1500 });
    expect(view.bot?.month.costUsd).toBeCloseTo(3 * CALL_USD, 10);
    expect(view.bot?.byKind.map((r) => [r.key, r.calls])).toEqual([["chat", 3]]);
    expect(view.bot?.byModel.map((r) => [r.key, r.calls])).toEqual([["fake-model", 3]]);

    const fresh = (
      await rig.request("/api/usage?conversation=c", { headers: rig.bearer() })
    ).json<UsageView>();
    expect(fresh.conversation.month).toMatchObject({ calls: 0, text: "no LLM calls" });
    expect((await rig.request("/api/usage?conversation=BAD!", { headers: rig.bearer() })).status).toBe(400);
  });

  it("shows no whole-bot figures when the page's sender is not an owner", async () => {
    // Everybody may talk ("*"), so nobody in particular is an owner.
    rig = await start({ channels: { web: { token: "test-token-0123456789abcdef", allowFrom: ["*"] } } });
    await turn(rig, "a", "one");
    const view = (
      await rig.request("/api/usage?conversation=a", { headers: rig.bearer() })
    ).json<UsageView>();
    expect(view.conversation.month).toMatchObject({ calls: 1, promptTokens: 1000 });
    expect(view.bot).toBeUndefined();
  });
});
