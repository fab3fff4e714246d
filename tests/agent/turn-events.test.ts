/**
 * The turn lifecycle on the bus: every turn publishes turnStart, its replies tagged with its id, and
 * exactly one turnEnd (done, stopped, failed) after them. A reply of another turn (cron) never ends it.
 */
import { afterEach, describe, expect, it } from "vitest";
import { systemMessage, type OutboundMessage, type TurnEvent } from "../../src/bus/types.js";
import { lastUserText } from "../fakes/openai-server.js";
import { startHarness, type Harness } from "../helpers/agent-harness.js";
import { createGate } from "../helpers/gate.js";
import { waitFor } from "../helpers/wait.js";

let h: Harness;
afterEach(async () => {
  await h?.cleanup();
});

type Seen = { turn: TurnEvent } | { out: OutboundMessage };

/** Turn events and outbound messages in the order the bus carried them. */
function record(harness: Harness): Seen[] {
  const seen: Seen[] = [];
  harness.bus.onTurn((turn) => seen.push({ turn }));
  harness.bus.onOutbound((out) => seen.push({ out }));
  return seen;
}

/** A compact picture of the timeline: "start:<id>", "final:<id>:<content>", "end:<id>:<outcome>". */
function timeline(seen: Seen[]): string[] {
  return seen.map((s) =>
    "turn" in s
      ? s.turn.kind === "turnStart"
        ? `start:${s.turn.turnId}`
        : `end:${s.turn.turnId}:${s.turn.outcome}`
      : `${s.out.kind ?? "final"}:${s.out.turnId ?? "-"}:${s.out.content}`,
  );
}

const turnIds = (seen: Seen[]) => [
  ...new Set(seen.flatMap((s) => ("turn" in s && s.turn.kind === "turnStart" ? [s.turn.turnId] : []))),
];

describe("turn events", () => {
  it("done: turnStart, the replies with the turn's id, then turnEnd", async () => {
    h = await startHarness();
    const seen = record(h);
    h.fake!.enqueue(
      { content: "looking", toolCalls: [{ name: "list_dir", arguments: { path: "." } }] },
      { content: "Here it is." },
    );
    await h.ask("chat", "what is there?");
    await h.loop.idle();
    const [id] = turnIds(seen);
    expect(id).toBeTruthy();
    expect(timeline(seen)).toEqual([
      `start:${id}`,
      `progress:${id}:looking`,
      `toolHint:${id}:list_dir(".")`,
      `final:${id}:Here it is.`,
      `end:${id}:done`,
    ]);
    const start = seen.find((s) => "turn" in s)!;
    expect("turn" in start && start.turn).toMatchObject({ channel: "test", chatId: "chat" });
    expect("turn" in start && start.turn.background).toBeUndefined();
  });

  it("gives every turn a fresh id; a command is a turn too", async () => {
    h = await startHarness();
    const seen = record(h);
    h.fake!.setHandler((req) => ({ content: `re: ${lastUserText(req)}` }));
    await h.ask("chat", "one");
    await h.ask("chat", "/help");
    await h.loop.idle();
    const ids = turnIds(seen);
    expect(ids).toHaveLength(2);
    expect(timeline(seen)).toEqual([
      `start:${ids[0]}`,
      `final:${ids[0]}:re: one`,
      `end:${ids[0]}:done`,
      `start:${ids[1]}`,
      expect.stringMatching(new RegExp(`^final:${ids[1]}:`)),
      `end:${ids[1]}:done`,
    ]);
  });

  it("stopped: /stop answers outside the turn, and the turn ends once with outcome stopped", async () => {
    h = await startHarness();
    const seen = record(h);
    h.fake!.setHandler(() => ({ content: "too late", delayMs: 120_000 }));
    h.send("chat", "slow question");
    await waitFor(() => h.fake!.requests.length === 1);
    await h.ask("chat", "/stop");
    await h.loop.idle();
    const [id] = turnIds(seen);
    expect(turnIds(seen)).toHaveLength(1);
    expect(timeline(seen)).toEqual([
      `start:${id}`,
      "final:-:Stopped the running reply.",
      `end:${id}:stopped`,
    ]);
  });

  it("failed: the LLM fails, the user is told within the turn, and the turn ends failed", async () => {
    h = await startHarness();
    const seen = record(h);
    h.fake!.setHandler(() => ({ status: 503 }));
    await h.ask("chat", "hello");
    await h.loop.idle();
    const [id] = turnIds(seen);
    const lines = timeline(seen);
    expect(lines).toHaveLength(3);
    expect(lines[0]).toBe(`start:${id}`);
    expect(lines[1]).toMatch(new RegExp(`^final:${id}:`));
    expect(lines[2]).toBe(`end:${id}:failed`);
  });

  it("a cron reply to a chat during a running turn there does not end that turn", async () => {
    h = await startHarness();
    const seen = record(h);
    const gate = createGate();
    h.fake!.setHandler(async (req) => {
      const text = lastUserText(req);
      if (text.includes("remind me")) return { content: "Time to stretch!" };
      await gate.opened;
      return { content: "the long answer" };
    });
    h.send("chat", "a long question");
    await waitFor(() => h.fake!.requests.length === 1);
    const [userTurn] = turnIds(seen);

    h.bus.publishInbound(
      systemMessage({
        senderId: "cron",
        content: "remind me to stretch",
        origin: { channel: "test", chatId: "chat" },
        sessionKey: "cron:job-1",
      }),
    );
    await waitFor(() => h.outbound.some((m) => m.content === "Time to stretch!"));
    const cronTurn = turnIds(seen).find((id) => id !== userTurn)!;
    const cronStart = seen.find((s) => "turn" in s && s.turn.turnId === cronTurn);
    // Background work names the chat it reports to.
    expect(cronStart && "turn" in cronStart && cronStart.turn).toMatchObject({
      channel: "test",
      chatId: "chat",
      background: true,
    });
    await waitFor(() => timeline(seen).includes(`end:${cronTurn}:done`));
    expect(timeline(seen)).toContain(`final:${cronTurn}:Time to stretch!`);
    expect(timeline(seen).filter((l) => l.startsWith(`end:${userTurn}`))).toEqual([]);

    gate.open();
    await h.loop.idle();
    expect(timeline(seen).slice(-2)).toEqual([`final:${userTurn}:the long answer`, `end:${userTurn}:done`]);
  });
});
