/**
 * Streamed replies through the channel manager: the turn's deltas become a live preview on a
 * channel that can show one, and the turn's final replaces it in place, exactly once, or is sent
 * as a new message when the preview cannot take it. The platforms' surfaces are tested through
 * their fakes; here a channel keeps its messages in memory the way a chat shows them.
 */
import { afterEach, describe, expect, it } from "vitest";
import { MessageBus } from "../../src/bus/bus.js";
import type { OutboundMessage, TurnEvent } from "../../src/bus/types.js";
import { STOPPED_MARK } from "../../src/channels/live-preview.js";
import { ChannelManager } from "../../src/channels/manager.js";
import type { PreviewSurface, PreviewTarget } from "../../src/channels/types.js";
import { ChannelError } from "../../src/util/errors.js";
import { captureLog } from "../helpers/log.js";
import { TestChannel } from "../helpers/test-channel.js";
import { waitFor } from "../helpers/wait.js";

/** A channel whose chat shows previews: every message it holds, as it looks now. */
class StreamingChannel extends TestChannel {
  /** The chat's messages as they look now (previews edited in place, sends appended). */
  readonly screen: string[] = [];
  readonly targets: PreviewTarget[] = [];
  editFailure: Error | undefined;

  override async send(msg: OutboundMessage): Promise<void> {
    await super.send(msg);
    this.screen.push(msg.content);
  }

  previewSurface(target: PreviewTarget): PreviewSurface {
    this.targets.push(target);
    return {
      maxChars: 1000,
      post: async (text) => String(this.screen.push(text) - 1),
      edit: async (ref, text) => {
        if (this.editFailure) throw this.editFailure;
        this.screen[Number(ref)] = text;
      },
      finalParts: (content) => [`**${content}**`],
    };
  }
}

describe("streamed replies through the channel manager", () => {
  let bus: MessageBus;
  let channel: StreamingChannel;
  let manager: ChannelManager;

  async function start(streaming: boolean): Promise<void> {
    bus = new MessageBus();
    channel = new StreamingChannel("chat");
    manager = new ChannelManager({
      bus,
      sendProgress: false,
      sendToolHints: false,
      streaming,
      streamIntervalMs: 0,
      log: captureLog().log,
    });
    manager.add(channel, { allowFrom: ["*"] });
    await manager.start();
  }

  afterEach(async () => {
    await manager.stop(1000);
  });

  const turn = (kind: TurnEvent["kind"], outcome?: TurnEvent["outcome"]): TurnEvent => ({
    kind,
    turnId: "t1",
    channel: "chat",
    chatId: "c1",
    ...(outcome ? { outcome } : {}),
  });
  const out = (kind: OutboundMessage["kind"], content: string): OutboundMessage => ({
    channel: "chat",
    chatId: "c1",
    kind,
    content,
    turnId: "t1",
    threadId: "9",
    metadata: { chatType: "supergroup" },
  });

  it("shows the reply as it grows and replaces it in place with the final, sent once", async () => {
    await start(true);
    bus.publishTurn(turn("turnStart"));
    bus.publishOutbound(out("delta", "The answer"));
    await waitFor(() => channel.screen.length === 1, undefined, "the preview");
    bus.publishOutbound(out("delta", "The answer is 42"));
    bus.publishOutbound(out("final", "The answer is 42."));
    bus.publishTurn(turn("turnEnd", "done"));
    await manager.flush(5000);
    expect(channel.screen).toEqual(["**The answer is 42.**"]);
    expect(channel.sent).toEqual([]); // finalized in place, never sent anew
    expect(channel.targets).toEqual([
      { chatId: "c1", turnId: "t1", threadId: "9", metadata: { chatType: "supergroup" } },
    ]);
  });

  it("with streaming off, deltas are not shown and the final is sent as usual", async () => {
    await start(false);
    bus.publishOutbound(out("delta", "The answer"));
    bus.publishOutbound(out("final", "The answer is 42."));
    await manager.flush(5000);
    expect(channel.screen).toEqual(["The answer is 42."]);
    expect(channel.targets).toEqual([]);
  });

  it("a tool-calling turn keeps its streamed progress and streams the answer in a new message", async () => {
    await start(true);
    bus.publishOutbound(out("delta", "Let me look"));
    await waitFor(() => channel.screen.length === 1, undefined, "the preview");
    bus.publishOutbound(out("progress", "Let me look that up."));
    bus.publishOutbound(out("delta", "Found it"));
    bus.publishOutbound(out("final", "Found it: 42."));
    await manager.flush(5000);
    expect(channel.screen).toEqual(["**Let me look that up.**", "**Found it: 42.**"]);
    expect(channel.sent).toEqual([]);
  });

  it("when the preview cannot be edited, the final is sent as a new message, once", async () => {
    await start(true);
    bus.publishOutbound(out("delta", "Half an ans"));
    await waitFor(() => channel.screen.length === 1, undefined, "the preview");
    channel.editFailure = new ChannelError("message to edit not found", { permanent: true });
    bus.publishOutbound(out("delta", "Half an answer"));
    bus.publishOutbound(out("final", "A whole answer."));
    await manager.flush(5000);
    expect(channel.screen).toEqual(["Half an ans", "A whole answer."]);
    expect(channel.sent.map((m) => m.content)).toEqual(["A whole answer."]);
  });

  it("/stop mid-stream leaves the text shown so far, marked stopped, and sends nothing more", async () => {
    await start(true);
    bus.publishTurn(turn("turnStart"));
    bus.publishOutbound(out("delta", "Once upon a time"));
    await waitFor(() => channel.screen.length === 1, undefined, "the preview");
    bus.publishTurn(turn("turnEnd", "stopped"));
    await manager.flush(5000);
    bus.publishOutbound(out("delta", "Once upon a time there was"));
    await manager.flush(5000);
    expect(channel.screen).toEqual([`Once upon a time${STOPPED_MARK}`]);
  });
});
