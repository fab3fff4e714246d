/**
 * Streamed replies on every platform, each through the loopback fake of its API: the turn's deltas
 * show a live preview that grows, the final replaces it exactly once and looks exactly as a final
 * sent without streaming, the preview never updates faster than configured, a long answer continues
 * in a second message, /stop leaves the partial text marked, a preview that cannot be edited
 * leaves the final to be sent once as a new message, and a tool-calling turn of the real agent
 * (the streaming fake LLM) shows its progress, then the answer.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MessageBus } from "../../../src/bus/bus.js";
import type { InboundMessage, OutboundMessage, TurnEvent } from "../../../src/bus/types.js";
import { ChannelManager } from "../../../src/channels/manager.js";
import { toolCall, type FakeReply } from "../../fakes/openai-server.js";
import { startHarness, type Harness } from "../../helpers/agent-harness.js";
import { captureLog } from "../../helpers/log.js";
import { waitFor } from "../../helpers/wait.js";
import type { PlatformRig } from "./driver.js";
import { DRIVERS } from "./drivers.js";

const ANSWER = "The answer is **42**, as everyone knows.";

describe.each(DRIVERS)("streamed replies: $name", (driver) => {
  let workspace: string;
  let rig: PlatformRig;
  let bus: MessageBus;
  let manager: ChannelManager | undefined;
  let msg: InboundMessage;
  let turns = 0;
  /** The real agent on `bus`, for the tests that stream from the fake LLM. */
  let agent: Harness | undefined;

  beforeEach(async () => {
    workspace = await mkdtemp(join(tmpdir(), `palaver-streaming-${driver.name}-`));
    rig = await driver.create({ workspace });
    bus = new MessageBus();
  });

  afterEach(async () => {
    await manager?.stop(1000);
    manager = undefined;
    await agent?.cleanup();
    agent = undefined;
    await rig.close();
    await rm(workspace, { recursive: true, force: true });
  });

  /** A manager streaming at `intervalMs`, and a message from the allowed person to answer. */
  async function start(intervalMs: number): Promise<void> {
    const inbound: InboundMessage[] = [];
    bus.onInbound((m) => inbound.push(m));
    manager = new ChannelManager({
      bus,
      sendProgress: true,
      sendToolHints: false,
      streaming: true,
      streamIntervalMs: intervalMs,
      log: captureLog().log,
      outboxRetryBaseMs: 20,
    });
    manager.add(rig.channel, { allowFrom: [rig.allowedSender] });
    await manager.start();
    await waitFor(() => manager!.status()[0]?.state === "running", undefined, `${driver.name} running`);
    await rig.userSends(rig.allowedSender, "tell me");
    await waitFor(() => inbound.length === 1, undefined, "the message on the bus");
    msg = inbound[0]!;
  }

  function out(kind: OutboundMessage["kind"], content: string, turnId?: string): OutboundMessage {
    return {
      channel: msg.channel,
      chatId: msg.chatId,
      kind,
      content,
      ...(turnId ? { turnId } : {}),
      ...(msg.metadata ? { metadata: msg.metadata } : {}),
    };
  }

  function turn(kind: TurnEvent["kind"], turnId: string, outcome?: TurnEvent["outcome"]): TurnEvent {
    return {
      kind,
      turnId,
      channel: msg.channel,
      chatId: msg.chatId,
      ...(msg.metadata ? { metadata: msg.metadata } : {}),
      ...(outcome ? { outcome } : {}),
    };
  }

  /** How `content` looks as a final sent without streaming (the messages it became). */
  async function shownWithoutStreaming(content: string): Promise<string[]> {
    const before = rig.currentTexts().length;
    bus.publishOutbound(out("final", content));
    await waitFor(() => rig.currentTexts().length > before, undefined, "the plain final");
    await manager!.flush(5000);
    return rig.currentTexts().slice(before);
  }

  /** Streams `pieces` as the growing text of one turn, waiting for each to be on screen when `visible`. */
  async function stream(turnId: string, pieces: string[], visible: boolean): Promise<void> {
    bus.publishTurn(turn("turnStart", turnId));
    let text = "";
    for (const piece of pieces) {
      text += piece;
      bus.publishOutbound(out("delta", text, turnId));
      const shown = text;
      if (visible)
        await waitFor(() => rig.previews().includes(shown), undefined, `preview "${shown.slice(-20)}"`);
    }
  }

  async function finish(
    turnId: string,
    content: string,
    outcome: TurnEvent["outcome"] = "done",
  ): Promise<void> {
    bus.publishOutbound(out("final", content, turnId));
    bus.publishTurn(turn("turnEnd", turnId, outcome));
    await manager!.flush(5000);
  }

  const nextTurn = () => `t${++turns}`;

  it("the preview grows, and the final replaces it exactly once, looking as an unstreamed final", async () => {
    await start(0);
    const expected = await shownWithoutStreaming(ANSWER);
    const before = rig.currentTexts().length;
    const t = nextTurn();
    await stream(t, ["The answer", " is **42**", ", as everyone"], true);
    await finish(t, ANSWER);
    expect(rig.currentTexts().slice(before)).toEqual(expected);
    expect(rig.previews().filter((p) => p.startsWith("The answer")).length).toBeGreaterThanOrEqual(3);
  });

  it("never updates the preview faster than the interval: text in between is coalesced", async () => {
    await start(60_000);
    const t = nextTurn();
    const words = Array.from({ length: 30 }, (_, i) => ` word${i}`);
    await stream(t, ["Counting:"], true);
    await stream(t, words, false);
    expect(rig.previews().filter((p) => p.startsWith("Counting:"))).toEqual(["Counting:"]);
    await finish(t, `Counting:${words.join("")}`);
    expect(rig.currentTexts().at(-1)).toBe(`Counting:${words.join("")}`);
  });

  it("an answer longer than one message continues in a second one", async () => {
    await start(0);
    const before = rig.currentTexts().length;
    const word = "streaming ";
    const long = word.repeat(Math.ceil((driver.messageLimit * 1.5) / word.length)).trim();
    const t = nextTurn();
    const pieces = long.match(new RegExp(`.{1,${Math.ceil(long.length / 6)}}`, "gs"))!;
    await stream(t, pieces, false);
    await waitFor(
      () => rig.previews().some((p) => p.length > driver.messageLimit / 2),
      undefined,
      "a long preview",
    );
    await finish(t, long);
    const shown = rig.currentTexts().slice(before);
    expect(shown.length).toBe(2);
    for (const text of shown) expect(text.length).toBeLessThanOrEqual(driver.messageLimit);
    expect(shown.join(" ").replace(/\s+/g, " ")).toBe(long);
  });

  it("/stop mid-stream leaves the partial text, marked stopped, and nothing more arrives", async () => {
    await start(0);
    const t = nextTurn();
    await stream(t, ["Once upon", " a time"], true);
    bus.publishTurn(turn("turnEnd", t, "stopped"));
    await manager!.flush(5000);
    await waitFor(() => rig.currentTexts().some((x) => x.includes("stopped")), undefined, "the stopped mark");
    const after = rig.previews().length;
    bus.publishOutbound(out("delta", "Once upon a time there was", t));
    await manager!.flush(5000);
    expect(rig.previews().length).toBe(after);
    expect(rig.currentTexts().filter((x) => x.startsWith("Once upon"))).toEqual([
      expect.stringMatching(/^Once upon a time\s+⏹ stopped$/),
    ]);
  });

  it("when the preview cannot be edited, the final is sent once as a new message", async () => {
    await start(0);
    const expected = await shownWithoutStreaming(ANSWER);
    const t = nextTurn();
    await stream(t, ["The answer"], true);
    rig.failNextEdit();
    await stream(t, [" is **42**"], false);
    await finish(t, ANSWER);
    expect(rig.currentTexts().filter((x) => x === expected[0])).toHaveLength(2); // the unstreamed one + this
  });

  it("the turn's plan is a message of its own beside the reply: posted once, paced, left with its last state", async () => {
    await start(60_000);
    const expected = await shownWithoutStreaming(ANSWER);
    const before = rig.currentTexts().length;
    const t = nextTurn();
    const states = ["▶ Look it up\n☐ Answer", "☑ Look it up\n▶ Answer", "☑ Look it up\n☑ Answer"];
    bus.publishTurn(turn("turnStart", t));
    bus.publishOutbound(out("plan", states[0]!, t));
    await waitFor(() => rig.previews().includes(states[0]!), undefined, "the first checklist");
    // Within the interval: only the newest of these is shown, when the turn ends.
    bus.publishOutbound(out("plan", states[1]!, t));
    bus.publishOutbound(out("plan", states[2]!, t));
    await stream(t, ["The answer"], true);
    await finish(t, ANSWER);
    await waitFor(() => rig.currentTexts().includes(states[2]!), undefined, "the last checklist");

    expect(rig.previews()).not.toContain(states[1]);
    const shown = rig.currentTexts().slice(before);
    expect(shown).toEqual([states[2], ...expected]);
  });

  it("a tool-calling turn streams its progress, then the answer: each shown once, nothing lost", async () => {
    const PROGRESS = "Let me look that up.";
    // Pieces at a model's pace, so both texts are seen growing.
    const pace = { pieceChars: 4, pieceDelayMs: 15 };
    const script: FakeReply[] = [
      { content: PROGRESS, toolCalls: [toolCall("list_dir", { path: "." })], ...pace },
      { content: ANSWER, ...pace },
    ];
    agent = await startHarness({ config: { channels: { streaming: true } } });
    agent.fake!.enqueue(...script);
    bus = agent.bus; // the agent answers what the channel admits, as in the gateway
    await start(0);
    await waitFor(
      () => agent!.outbound.some((m) => (m.kind ?? "final") === "final" && m.turnId !== undefined),
      undefined,
      "the turn's final",
    );
    await manager!.flush(5000);
    const shown = rig.currentTexts();
    const previews = rig.previews();

    // The model got the tool's result and wrote the answer after it: both calls streamed.
    expect(agent.fake!.requests.map((r) => r.body.stream)).toEqual([true, true]);
    expect(agent.fake!.requests[1]!.body.messages.at(-1)?.role).toBe("tool");
    // Each text was on screen while it was written (a part of it), the progress first.
    const partOf = (text: string) => (p: string) => p.length < text.length && text.startsWith(p);
    const progressAt = previews.findIndex(partOf(PROGRESS));
    expect(progressAt).toBeGreaterThanOrEqual(0);
    expect(previews.findIndex(partOf(ANSWER))).toBeGreaterThan(progressAt);
    // Progress, then the answer, each exactly once and exactly as a final of that text looks.
    const expected = [...(await shownWithoutStreaming(PROGRESS)), ...(await shownWithoutStreaming(ANSWER))];
    expect(shown).toEqual(expected);
  });
});
