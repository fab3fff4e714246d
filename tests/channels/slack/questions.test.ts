/**
 * Questions with buttons on Slack, the platform's specifics: Block Kit as posted, presses over Socket
 * Mode and over HTTP (a signed form-encoded `payload=`), presses that are not ours, chat.update edits
 * and their failures, a question too long for one section.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { OutboundMessage } from "../../../src/bus/types.js";
import { classifySendFailure } from "../../../src/channels/delivery.js";
import { pressOf, SECTION_LIMIT } from "../../../src/channels/slack/questions.js";
import { SLACK_MESSAGE_LIMIT } from "../../../src/channels/slack/format.js";
import type { ChoiceClick, ChoiceOutcome } from "../../../src/channels/types.js";
import { ChannelError } from "../../../src/util/errors.js";
import { type Block, signSlackRequest } from "../../fakes/slack-server.js";
import { waitFor } from "../../helpers/wait.js";
import { slackRig, type SlackRig } from "./helpers.js";

const POLICY = { baseMs: 10, maxMs: 10 };

let rig: SlackRig | undefined;
afterEach(async () => {
  await rig?.cleanup();
  rig = undefined;
});

/** A rig whose sink records presses and answers them with `outcome`. */
async function startRig(
  config: Record<string, unknown> = {},
  opts: Parameters<typeof slackRig>[1] = {},
): Promise<{ rig: SlackRig; clicks: ChoiceClick[]; answer: { outcome: ChoiceOutcome } }> {
  const clicks: ChoiceClick[] = [];
  const answer = { outcome: { accepted: true, notice: "Approved." } as ChoiceOutcome };
  rig = await slackRig(config, {
    choose: (click) => {
      clicks.push(click);
      return answer.outcome;
    },
    ...opts,
  });
  await rig.start();
  return { rig, clicks, answer };
}

function question(id: string, content: string, threadId?: string): OutboundMessage {
  return {
    channel: "slack",
    chatId: "D1",
    kind: "question",
    content,
    ...(threadId ? { threadId } : {}),
    question: {
      id,
      choices: [
        { id: "approve", label: "Approve", style: "primary" },
        { id: "deny", label: "Deny", style: "danger" },
        { id: "always", label: "Always allow this in this chat" },
      ],
    },
  };
}

function edit(questionId: string, content: string, ref?: string): OutboundMessage {
  return {
    channel: "slack",
    chatId: "D1",
    kind: "edit",
    content,
    edit: { questionId, ...(ref ? { ref } : {}) },
  };
}

async function ask(r: SlackRig, msg: OutboundMessage): Promise<string> {
  const sent = await r.channel.send(msg);
  if (!sent) throw new Error("a question's send returned no ref");
  return sent.ref;
}

function blocksOf(r: SlackRig, ts: string): Block[] {
  return r.fake.message("D1", ts)?.blocks ?? [];
}

describe("Slack questions: Block Kit", () => {
  it("posts the text as a mrkdwn section with the buttons under it, a fallback text, and returns its ts", async () => {
    const { rig: r } = await startRig();
    const ref = await ask(r, question("q1", "Run **rm -rf build** in <workspace>?"));
    const call = r.fake.callsTo("chat.postMessage")[0]!;
    expect(call.params.text).toBe("Run *rm -rf build* in &lt;workspace&gt;?");
    expect(JSON.parse(call.params.blocks as string)).toEqual([
      { type: "section", text: { type: "mrkdwn", text: "Run *rm -rf build* in &lt;workspace&gt;?" } },
      {
        type: "actions",
        elements: [
          {
            type: "button",
            action_id: "q:q1:approve",
            value: "q:q1:approve",
            text: { type: "plain_text", text: "Approve", emoji: true },
            style: "primary",
          },
          {
            type: "button",
            action_id: "q:q1:deny",
            value: "q:q1:deny",
            text: { type: "plain_text", text: "Deny", emoji: true },
            style: "danger",
          },
          {
            type: "button",
            action_id: "q:q1:always",
            value: "q:q1:always",
            text: { type: "plain_text", text: "Always allow this in this chat", emoji: true },
          },
        ],
      },
    ]);
    expect(ref).toBe(r.fake.botMessages()[0]!.message.ts);
  });

  it("a question in a thread is posted there, and the press is answered in that thread", async () => {
    const { rig: r, clicks } = await startRig();
    const ref = await ask(r, question("q2", "Go on?", "1700000000.000001"));
    expect(r.fake.callsTo("chat.postMessage")[0]!.params.thread_ts).toBe("1700000000.000001");
    await r.fake.pressButton("U1", "D1", ref, "Approve");
    await waitFor(() => r.fake.ephemerals.length === 1, undefined, "the ephemeral notice");
    expect(r.fake.ephemerals[0]).toEqual({
      channel: "D1",
      user: "U1",
      text: "Approved.",
      thread_ts: "1700000000.000001",
    });
    expect(clicks[0]).toMatchObject({ threadId: "1700000000.000001", metadata: { messageId: ref } });
  });

  it("a question too long for one section is split into sections under Slack's limit, all of it shown", async () => {
    const { rig: r } = await startRig();
    const paragraphs = Array.from({ length: 40 }, (_, i) => `Paragraph ${i}: ${"x".repeat(200)}`);
    const ref = await ask(r, question("q3", paragraphs.join("\n\n")));
    const sections = blocksOf(r, ref).filter((b) => b.type === "section");
    expect(sections.length).toBeGreaterThan(2);
    for (const s of sections) expect(s.text!.text.length).toBeLessThanOrEqual(SECTION_LIMIT);
    const shown = r.fake.shownText(r.fake.message("D1", ref));
    for (const p of paragraphs) expect(shown).toContain(p);
    expect((r.fake.callsTo("chat.postMessage")[0]!.params.text as string).length).toBeLessThanOrEqual(
      SLACK_MESSAGE_LIMIT,
    );
    expect(r.fake.buttonsOf(r.fake.message("D1", ref))).toEqual([
      "Approve",
      "Deny",
      "Always allow this in this chat",
    ]);
  });
});

describe("Slack questions: presses", () => {
  it("a press over Socket Mode is acknowledged, reaches choose with who pressed what, and only the presser sees the notice", async () => {
    const { rig: r, clicks, answer } = await startRig();
    answer.outcome = { accepted: true, notice: "Approved, running it now." };
    const ref = await ask(r, question("q4", "Run it?"));
    const ack = await r.fake.pressButton("U1", "D1", ref, "Deny");
    expect(ack.envelope_id).toMatch(/\S/);
    await waitFor(() => r.fake.ephemerals.length === 1, undefined, "the ephemeral notice");
    expect(r.fake.ephemerals[0]).toEqual({ channel: "D1", user: "U1", text: "Approved, running it now." });
    expect(clicks).toEqual([
      {
        channel: "slack",
        chatId: "D1",
        senderId: "U1",
        senderAliases: ["alice"],
        questionId: "q4",
        choiceId: "deny",
        metadata: { messageId: ref, teamId: "T1" },
      },
    ]);
    expect(r.inbound).toHaveLength(0);
    expect(r.fake.buttonsOf(r.fake.message("D1", ref))).toHaveLength(3); // only an edit takes them away
  });

  it("interactions that are not our buttons are acknowledged and ignored", async () => {
    const { rig: r, clicks } = await startRig();
    const ref = await ask(r, question("q5", "Run it?"));
    const payload = r.fake.blockActions("U1", "D1", ref, "Approve");
    const withAction = (action_id: string) => ({
      ...payload,
      actions: [{ ...(payload.actions as Record<string, unknown>[])[0], action_id, value: action_id }],
    });
    // Another app's button, data that only looks like ours, one field too many.
    for (const data of ["open_settings", "q:Bad Id:approve", "q:q5:approve:extra"]) {
      const ack = await r.fake.pushInteraction(withAction(data));
      expect(ack.envelope_id).toMatch(/\S/);
    }
    // Ours, after them: once it is answered, the others were long since handled.
    await r.fake.pressButton("U1", "D1", ref, "Approve");
    await waitFor(() => r.fake.ephemerals.length === 1, undefined, "the notice of the real press");
    expect(clicks.map((c) => c.choiceId)).toEqual(["approve"]);
    expect(r.fake.ephemerals).toHaveLength(1);
  });

  it("without a question desk the presser is told the question can't be answered here", async () => {
    rig = await slackRig();
    await rig.start();
    const ref = await ask(rig, question("q6", "Run it?"));
    await rig.fake.pressButton("U1", "D1", ref, "Approve");
    await waitFor(() => rig!.fake.ephemerals.length === 1, undefined, "the ephemeral notice");
    expect(rig.fake.ephemerals[0]!.text).toBe("This can't be answered here.");
  });

  it("an ephemeral notice Slack refuses does not break later presses", async () => {
    const { rig: r, clicks } = await startRig();
    const ref = await ask(r, question("q7", "Run it?"));
    r.fake.failNext("chat.postEphemeral", "user_not_in_channel");
    await r.fake.pressButton("U1", "D1", ref, "Approve");
    await waitFor(() => clicks.length === 1, undefined, "the first press");
    await r.fake.pressButton("U1", "D1", ref, "Deny");
    await waitFor(() => r.fake.ephemerals.length === 1, undefined, "the second press's notice");
    expect(clicks.map((c) => c.choiceId)).toEqual(["approve", "deny"]);
  });
});

describe("Slack questions: edits", () => {
  it("an edit rewrites the question's message and takes the buttons away; the same edit again succeeds", async () => {
    const { rig: r } = await startRig();
    const ref = await ask(r, question("q8", "Run it?"));
    await r.channel.send(edit("q8", "**Approved** by alice"));
    const update = r.fake.callsTo("chat.update")[0]!;
    expect(update.params).toMatchObject({
      channel: "D1",
      ts: ref,
      text: "*Approved* by alice",
      blocks: "[]",
    });
    expect(r.fake.message("D1", ref)).toMatchObject({ text: "*Approved* by alice" });
    expect(r.fake.buttonsOf(r.fake.message("D1", ref))).toEqual([]);
    // Slack has no "message is not modified": an unchanged edit is one more successful update.
    await expect(r.channel.send(edit("q8", "**Approved** by alice"))).resolves.toBeUndefined();
    expect(r.fake.callsTo("chat.update")).toHaveLength(2);
    expect(r.fake.delivered()).toHaveLength(1);
  });

  it("an edit of a message that is gone fails for good, so the manager does not retry it", async () => {
    const { rig: r } = await startRig();
    const err: unknown = await r.channel
      .send(edit("q9", "Expired", "1600000000.000100"))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ChannelError);
    expect(err).toMatchObject({ permanent: true, code: "message_not_found", method: "chat.update" });
    expect(classifySendFailure(err, 0, POLICY).retry).toBe(false);
  });

  it("an edit Slack refuses for the message's age or ownership fails for good too", async () => {
    const { rig: r } = await startRig();
    const ref = await ask(r, question("q10", "Run it?"));
    for (const code of ["edit_window_closed", "cant_update_message"]) {
      r.fake.failNext("chat.update", code);
      const err: unknown = await r.channel.send(edit("q10", "Approved", ref)).catch((e: unknown) => e);
      expect(err).toMatchObject({ permanent: true, code });
    }
  });

  it("an edit that names no ref, for a question this run never sent, becomes a message of its own", async () => {
    const { rig: r } = await startRig();
    await r.channel.send(edit("gone1", "Expired (palaver restarted)"));
    expect(r.fake.callsTo("chat.update")).toHaveLength(0);
    expect(r.fake.delivered().map((d) => d.text)).toEqual(["Expired (palaver restarted)"]);
  });

  it("an edit longer than one message keeps the start in the question's place and posts the rest after it", async () => {
    const { rig: r } = await startRig();
    const ref = await ask(r, question("q11", "Run it?", "1700000000.000002"));
    const lines = Array.from({ length: 30 }, (_, i) => `Line ${i}: ${"y".repeat(200)}`);
    await r.channel.send({ ...edit("q11", lines.join("\n\n")), threadId: "1700000000.000002" });
    const updated = r.fake.message("D1", ref)!;
    expect(updated.text!.length).toBeLessThanOrEqual(SLACK_MESSAGE_LIMIT);
    const after = r.fake.delivered().slice(1);
    expect(after.length).toBeGreaterThan(0);
    expect(after.every((d) => d.thread_ts === "1700000000.000002")).toBe(true);
    const all = [updated.text, ...after.map((d) => d.text)].join("\n");
    for (const line of lines) expect(all).toContain(line);
  });
});

describe("Slack questions: HTTP mode", () => {
  const SECRET = "fake-signing-secret";

  it("a press arrives as a signed form-encoded payload; an unsigned one is refused", async () => {
    const { rig: r, clicks } = await startRig(
      { mode: "http", appToken: "", signingSecret: SECRET, port: 0, path: "/hooks/slack" },
      { tuning: { httpHost: "127.0.0.1" } },
    );
    const url = `http://127.0.0.1:${r.channel.address!.port}/hooks/slack`;
    const ref = await ask(r, question("q12", "Run it?"));
    const body = new URLSearchParams({
      payload: JSON.stringify(r.fake.blockActions("U2", "D1", ref, "Deny")),
    }).toString();
    const form = { "content-type": "application/x-www-form-urlencoded" };

    const forged = await fetch(url, { method: "POST", body, headers: form });
    expect(forged.status).toBe(401);

    const res = await fetch(url, {
      method: "POST",
      body,
      headers: { ...form, ...signSlackRequest(SECRET, body) },
    });
    expect(res.status).toBe(200);
    await waitFor(() => r.fake.ephemerals.length === 1, undefined, "the ephemeral notice");
    expect(clicks).toEqual([
      expect.objectContaining({ senderId: "U2", questionId: "q12", choiceId: "deny" }),
    ]);
    expect(r.fake.ephemerals[0]).toMatchObject({ channel: "D1", user: "U2", text: "Approved." });
  });
});

describe("Slack questions: pressOf", () => {
  const base = {
    type: "block_actions",
    user: { id: "U1" },
    channel: { id: "C1" },
    actions: [{ action_id: "q:abc:yes" }],
  };

  it("reads the question and choice, and the thread only when the message is inside one", () => {
    expect(pressOf({ ...base, message: { ts: "1.1", thread_ts: "1.1" } })).toEqual({
      chatId: "C1",
      userId: "U1",
      questionId: "abc",
      choiceId: "yes",
      messageTs: "1.1",
    });
    expect(pressOf({ ...base, message: { ts: "1.2", thread_ts: "1.1" } })?.threadTs).toBe("1.1");
  });

  it("is undefined for other interactions", () => {
    expect(pressOf({ ...base, type: "view_submission" })).toBeUndefined();
    expect(pressOf({ ...base, actions: [{ action_id: "settings" }] })).toBeUndefined();
    expect(pressOf({ ...base, channel: undefined })).toBeUndefined();
    expect(pressOf(null)).toBeUndefined();
  });
});
