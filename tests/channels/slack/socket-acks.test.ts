/**
 * Socket Mode acknowledgements against the loopback fake Slack (the real Bolt and Socket Mode
 * client): in cluster mode (the sink has `stored`) an event's envelope is acknowledged only once
 * the message is stored, so an instance killed right after the ack loses nothing; in one process
 * at once, as Bolt does.
 */
import { afterEach, describe, expect, it } from "vitest";
import { channelMessage, dmEvent } from "../../fakes/slack-server.js";
import { waitFor } from "../../helpers/wait.js";
import { slackRig, type SlackRig } from "./helpers.js";

let rig: SlackRig | undefined;
afterEach(async () => {
  await rig?.cleanup();
  rig = undefined;
});

describe("Slack Socket Mode: acknowledgements", () => {
  it("cluster mode: acknowledges an event's envelope only once the message is stored", async () => {
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    let storedCalls = 0;
    rig = await slackRig(
      {},
      {
        stored: () => {
          storedCalls++;
          return held;
        },
        // Only the test's release lets the ack go: no bound within the test.
        tuning: { ackWaitMs: 60_000 },
      },
    );
    const { fake } = rig;
    // No redelivery within the test either (a redelivered envelope is acked at once, as a duplicate).
    fake.ackWindowMs = 60_000;
    await rig.start();
    await fake.waitForConnections(1);
    const kept = fake.pushEvent(dmEvent("keep me"));
    try {
      await waitFor(() => storedCalls === 1, undefined, "the hand-on to wait for stored()");
      expect(rig.inbound.map((m) => m.content)).toEqual(["keep me"]);
      // A message not for the bot is acknowledged at once, on the same socket: an ack sent for the
      // first event before this one (Bolt acks an event before its listeners run) reached the fake first.
      const passedBy = await fake.pushEvent(channelMessage("not for the bot"));
      expect(fake.acks.map((a) => a.envelope_id)).toEqual([passedBy.envelope_id]);
    } finally {
      release();
    }
    const ack = await kept;
    expect(fake.acks.map((a) => a.envelope_id)).toEqual([expect.any(String), ack.envelope_id]);
    expect(fake.socketRetries).toBe(0);
  });

  it("one process: acknowledges an event's envelope at once", async () => {
    rig = await slackRig();
    const { fake } = rig;
    await rig.start();
    await fake.waitForConnections(1);
    const ack = await fake.pushEvent(dmEvent("hello"));
    expect(fake.acks.map((a) => a.envelope_id)).toEqual([ack.envelope_id]);
    await rig.nextInbound(1);
    expect(rig.inbound.map((m) => m.content)).toEqual(["hello"]);
  });
});
