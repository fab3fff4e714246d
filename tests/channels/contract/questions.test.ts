/**
 * Questions with buttons (approvals, ask_human) on every platform, each through the loopback fake of
 * its API: the buttons are shown, a press reaches the question desk with who pressed what, a stranger
 * is refused before the desk sees it, and an "edit" rewrites the question and takes its buttons away
 * (also after a restart, by the ref its send returned).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MessageBus } from "../../../src/bus/bus.js";
import type { InboundMessage, OutboundMessage } from "../../../src/bus/types.js";
import { ChannelManager } from "../../../src/channels/manager.js";
import type { ChoiceClick, ChoiceOutcome, QuestionDesk } from "../../../src/channels/types.js";
import { captureLog } from "../../helpers/log.js";
import { waitFor } from "../../helpers/wait.js";
import type { PlatformRig } from "./driver.js";
import { DRIVERS } from "./drivers.js";

class RecordingDesk implements QuestionDesk {
  readonly refs = new Map<string, string>();
  readonly clicks: ChoiceClick[] = [];
  outcome: ChoiceOutcome = { accepted: true, notice: "Approved." };

  delivered(questionId: string, ref: string): void {
    this.refs.set(questionId, ref);
  }

  choose(click: ChoiceClick): ChoiceOutcome {
    this.clicks.push(click);
    return this.outcome;
  }
}

describe.each(DRIVERS)("questions with buttons: $name", (driver) => {
  let workspace: string;
  let rig: PlatformRig;
  let bus: MessageBus;
  let manager: ChannelManager;
  let desk: RecordingDesk;
  let inbound: InboundMessage[];

  beforeEach(async () => {
    workspace = await mkdtemp(join(tmpdir(), `palaver-questions-${driver.name}-`));
    rig = await driver.create({ workspace });
    bus = new MessageBus();
    inbound = [];
    bus.onInbound((msg) => inbound.push(msg));
    desk = new RecordingDesk();
    manager = new ChannelManager({
      bus,
      sendProgress: false,
      sendToolHints: false,
      log: captureLog().log,
      outboxRetryBaseMs: 20,
      questions: desk,
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

  /** Asks in the allowed person's chat (found from a message of theirs, as a turn would). */
  async function ask(id: string): Promise<InboundMessage> {
    await rig.userSends(rig.allowedSender, "clean the build folder");
    await waitFor(() => inbound.length === 1, undefined, "the message on the bus");
    const msg = inbound[0]!;
    const question: OutboundMessage = {
      channel: msg.channel,
      chatId: msg.chatId,
      kind: "question",
      content: "Run `rm -rf build`?",
      ...(msg.metadata ? { metadata: msg.metadata } : {}),
      question: {
        id,
        choices: [
          { id: "approve", label: "Approve", style: "primary" },
          { id: "deny", label: "Deny", style: "danger" },
        ],
      },
    };
    bus.publishOutbound(question);
    await waitFor(() => desk.refs.has(id), undefined, "the question delivered");
    return msg;
  }

  function edit(msg: InboundMessage, questionId: string, content: string, ref?: string): OutboundMessage {
    return {
      channel: msg.channel,
      chatId: msg.chatId,
      kind: "edit",
      content,
      edit: { questionId, ...(ref ? { ref } : {}) },
      ...(msg.metadata ? { metadata: msg.metadata } : {}),
    };
  }

  it("shows the choices as buttons and tells the desk where the question is", async () => {
    await ask("q1");
    expect(rig.buttons()).toEqual(["Approve", "Deny"]);
    expect(rig.currentTexts().at(-1)).toContain("rm -rf build");
    expect(desk.refs.get("q1")).toMatch(/\S/);
  });

  it("a press by an allowed person reaches the desk, and its notice is shown to them alone", async () => {
    const msg = await ask("q2");
    desk.outcome = { accepted: true, notice: "Approved, running it now." };
    const shown = await rig.press(rig.allowedSender, "Approve");
    expect(shown).toContain("Approved, running it now.");
    expect(desk.clicks).toEqual([
      expect.objectContaining({
        channel: msg.channel,
        chatId: msg.chatId,
        senderId: rig.allowedSender,
        questionId: "q2",
        choiceId: "approve",
      }),
    ]);
    expect(inbound).toHaveLength(1); // a press is not a message for the agent
  });

  it("a stranger's press is refused before the desk sees it, and the buttons stay", async () => {
    await ask("q3");
    const shown = await rig.press(rig.strangerSender, "Approve");
    expect(shown).toContain("not allowed");
    expect(desk.clicks).toEqual([]);
    expect(rig.buttons()).toEqual(["Approve", "Deny"]);
  });

  it("an edit rewrites the question and takes its buttons away", async () => {
    const msg = await ask("q4");
    const before = rig.currentTexts().length;
    bus.publishOutbound(edit(msg, "q4", "Approved by you: `rm -rf build`"));
    await waitFor(() => rig.currentTexts().at(-1)?.includes("Approved by you") === true, undefined, "edited");
    expect(rig.buttons()).toEqual([]);
    expect(rig.currentTexts()).toHaveLength(before);
  });

  it("an edit by ref works for a question this adapter never sent (after a restart)", async () => {
    const msg = await ask("q5");
    const ref = desk.refs.get("q5")!;
    bus.publishOutbound(edit(msg, "unknown1", "Expired (palaver restarted)", ref));
    await waitFor(() => rig.currentTexts().at(-1)?.includes("Expired") === true, undefined, "edited by ref");
    expect(rig.buttons()).toEqual([]);
  });
});
