/**
 * The same cases against every platform adapter, each through the loopback
 * fake of its API (drivers.ts lists them): the shared channel core (inbound
 * path, typing indicator, turn lifecycle, delivery) must behave the same on
 * all of them.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MessageBus } from "../../../src/bus/bus.js";
import type { InboundMessage, OutboundMessage, TurnEvent } from "../../../src/bus/types.js";
import { ChannelManager } from "../../../src/channels/manager.js";
import { captureLog } from "../../helpers/log.js";
import { waitFor } from "../../helpers/wait.js";
import { VOICE_TRANSCRIPT, type PlatformRig } from "./driver.js";
import { DRIVERS } from "./drivers.js";

describe.each(DRIVERS)("channel contract: $name", (driver) => {
  let workspace: string;
  let rig: PlatformRig;
  let bus: MessageBus;
  let manager: ChannelManager;
  let inbound: InboundMessage[];

  beforeEach(async () => {
    workspace = await mkdtemp(join(tmpdir(), `palaver-contract-${driver.name}-`));
    rig = await driver.create({ workspace });
    bus = new MessageBus();
    inbound = [];
    bus.onInbound((msg) => inbound.push(msg));
    manager = new ChannelManager({
      bus,
      sendProgress: false,
      sendToolHints: false,
      log: captureLog().log,
      outboxRetryBaseMs: 20,
    });
    manager.add(rig.channel, { allowFrom: [rig.allowedSender] });
    await manager.start();
    await waitFor(() => manager.status()[0]?.state === "running", undefined, `${driver.name} running`);
  });

  afterEach(async () => {
    await manager.stop(1000);
    await rig.close();
    await rm(workspace, { recursive: true, force: true });
  });

  /** A message from the allowed person, as the bus received it. */
  async function fromAllowed(text: string, file?: "document" | "voice"): Promise<InboundMessage> {
    await rig.userSends(rig.allowedSender, text, file);
    await waitFor(() => inbound.length === 1, undefined, "the message on the bus");
    return inbound[0]!;
  }

  function turn(kind: TurnEvent["kind"], msg: InboundMessage, turnId: string): TurnEvent {
    const replyTo = msg.messageId;
    return {
      kind,
      turnId,
      channel: msg.channel,
      chatId: msg.chatId,
      ...(typeof replyTo === "string" || typeof replyTo === "number" ? { replyTo: String(replyTo) } : {}),
      ...(msg.metadata ? { metadata: msg.metadata } : {}),
      ...(kind === "turnEnd" ? { outcome: "done" as const } : {}),
    };
  }

  function reply(msg: InboundMessage, content: string, turnId?: string): OutboundMessage {
    return {
      channel: msg.channel,
      chatId: msg.chatId,
      content,
      kind: "final",
      ...(msg.metadata ? { metadata: msg.metadata } : {}),
      ...(turnId ? { turnId } : {}),
    };
  }

  it("a refused sender causes no download, reaction or typing, only the refusal notice", async () => {
    await rig.userSends(rig.strangerSender, "let me in", "document");
    await waitFor(() => rig.texts().some((t) => t.includes("allow list")), undefined, "the refusal notice");
    expect(rig.downloads()).toBe(0);
    expect(rig.typingSignals()).toBe(0);
    expect(inbound).toEqual([]);
  });

  it("shows typing from turnStart to turnEnd of its turn, and a reply from no turn does not end it", async () => {
    const msg = await fromAllowed("what's up?");
    bus.publishTurn(turn("turnStart", msg, "t1"));
    await waitFor(() => rig.typingActive() && rig.typingSignals() >= 1, undefined, "typing shown");

    bus.publishOutbound(reply(msg, "Reminder: water the plants")); // a cron delivery: no turn
    await waitFor(() => rig.texts().includes("Reminder: water the plants"), undefined, "the reminder");
    await manager.flush(5000);
    expect(rig.typingActive()).toBe(true);
    if (driver.typing === "repeats") {
      const after = rig.typingSignals();
      await waitFor(() => rig.typingSignals() > after, undefined, "typing renewed after the reminder");
    }

    bus.publishOutbound(reply(msg, "the answer", "t1"));
    bus.publishTurn(turn("turnEnd", msg, "t1"));
    await waitFor(() => rig.texts().includes("the answer"), undefined, "the answer");
    await waitFor(() => !rig.typingActive(), undefined, "typing ended");
  });

  it("drops a reply that can never be delivered at once, and the chat's next reply goes out", async () => {
    const msg = await fromAllowed("hello");
    rig.failNextSend("permanent");
    bus.publishOutbound(reply(msg, "this one is lost"));
    bus.publishOutbound(reply(msg, "this one arrives"));
    await waitFor(() => rig.texts().includes("this one arrives"), undefined, "the next reply");
    await manager.flush(5000);
    // Retrying the lost one would have sent it before the next (one chat's replies go out in order).
    expect(rig.texts()).toEqual(["this one arrives"]);
  });

  it("retries a reply that failed for a passing reason, and delivers it once", async () => {
    const msg = await fromAllowed("hello");
    rig.failNextSend("transient");
    bus.publishOutbound(reply(msg, "worth the wait"));
    await waitFor(() => rig.texts().includes("worth the wait"), undefined, "the retried reply");
    await manager.flush(5000);
    expect(rig.texts().filter((t) => t === "worth the wait")).toHaveLength(1);
    // The retry waited out the platform's retry_after: one sent sooner would have met another 429.
    expect(rig.earlyRetries()).toBe(0);
  });

  it("transcribes a voice note through the transcription endpoint before it reaches the bus", async () => {
    const msg = await fromAllowed("", "voice");
    expect(msg.content).toContain(`transcribed: ${VOICE_TRANSCRIPT}`);
    expect(msg.media?.length).toBe(1);
  });
});
