/** The real Slack adapter (@slack/bolt: its Socket Mode receiver and Web API client) against the loopback fake Slack. */
import { INTERRUPTED_DOWNLOAD_NOTE } from "../../../src/channels/inbound.js";
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  BOT_ID,
  BOT_USER_ID,
  channelMessage,
  dmEvent,
  FakeSlack,
  mentionEvent,
  nextTs,
} from "../../fakes/slack-server.js";
import { SLACK_MESSAGE_LIMIT } from "../../../src/channels/slack/format.js";
import { createTranscriber } from "../../../src/channels/transcription.js";
import { ConfigSchema } from "../../../src/config/schema.js";
import { ChannelError } from "../../../src/util/errors.js";
import { waitFor } from "../../helpers/wait.js";
import { slackRig, turnOf, type SlackRig } from "./helpers.js";

let rig: SlackRig | undefined;
afterEach(async () => {
  await rig?.cleanup();
  rig = undefined;
});

async function started(config: Record<string, unknown> = {}, opts: Parameters<typeof slackRig>[1] = {}) {
  rig = await slackRig(config, opts);
  await rig.start();
  await rig.fake.waitForConnections(1);
  return rig;
}

describe("Slack Socket Mode: connecting", () => {
  it("connects with the bot and app tokens through apps.connections.open", async () => {
    const { fake } = await started();
    expect(fake.callsTo("auth.test")[0]!.token).toBe(fake.botToken);
    expect(fake.callsTo("apps.connections.open")[0]!.token).toBe(fake.appToken);
    expect(fake.connected).toBe(true);
  });

  it("reports a rejected bot token in plain words and opens no socket", async () => {
    const fake = await FakeSlack.start();
    rig = await slackRig({ botToken: "xoxb-wrong" }, { fake });
    try {
      await expect(rig.start()).rejects.toThrow(
        "the Slack bot token was rejected (check channels.slack.botToken): invalid_auth",
      );
      expect(fake.callsTo("apps.connections.open")).toHaveLength(0);
    } finally {
      await rig.cleanup();
      rig = undefined;
      await fake.close();
    }
  });

  it("reports a rejected app token in plain words", async () => {
    const fake = await FakeSlack.start();
    rig = await slackRig({ appToken: "xapp-wrong" }, { fake });
    try {
      await expect(rig.start()).rejects.toThrow(
        /the Slack app-level token was rejected \(check channels\.slack\.appToken/,
      );
      expect(fake.connections).toBe(0);
    } finally {
      await rig.cleanup();
      rig = undefined;
      await fake.close();
    }
  });

  it("reconnects after Slack closes the socket and loses no message", async () => {
    const { fake } = await started();
    await fake.closeSocket("close");
    expect(fake.connected).toBe(false);
    // Sent while the client is away: Slack holds it until the next connection.
    const acked = fake.pushEvent(dmEvent("while you were away"));
    await fake.waitForConnections(2);
    await acked;
    expect((await rig!.nextInbound(1)).content).toBe("while you were away");

    // Slack's "disconnect" message (a refresh) and a dropped TCP connection work the same way.
    await fake.closeSocket("disconnect");
    await fake.waitForConnections(3);
    await fake.closeSocket("terminate");
    await fake.waitForConnections(4);
    await fake.pushEvent(dmEvent("still here"));
    expect((await rig!.nextInbound(2)).content).toBe("still here");
    expect(fake.callsTo("apps.connections.open").length).toBe(4);
  });

  it("survives a reconnect Slack refuses (a revoked app token, say) and tries again later", async () => {
    const { fake } = await started({}, { tuning: { reconnectRetryMs: 100 } });
    fake.failNext("apps.connections.open", "invalid_auth");
    await fake.closeSocket("close");
    await fake.waitForCalls("apps.connections.open", 2);
    expect(fake.connected).toBe(false);
    // The channel's own retry: a new apps.connections.open, and the socket is back.
    await fake.waitForConnections(2);
    expect(fake.callsTo("apps.connections.open")).toHaveLength(3);
    await fake.pushEvent(dmEvent("back again"));
    expect((await rig!.nextInbound(1)).content).toBe("back again");
  });

  it("closes the socket cleanly on stop", async () => {
    const { fake, channel } = await started();
    await channel.stop();
    await fake.waitForDisconnect(2000);
    expect(fake.connected).toBe(false);
  });
});

describe("Slack Socket Mode: receiving", () => {
  it("takes a DM into the DM's session with the sender's name and acks it", async () => {
    const { fake } = await started();
    const event = dmEvent("hello &amp; welcome");
    const ack = await fake.pushEvent(event);
    expect(typeof ack.envelope_id).toBe("string");
    const msg = await rig!.nextInbound(1);
    expect(msg).toEqual({
      channel: "slack",
      senderId: "U1",
      chatId: "D1",
      content: "hello & welcome",
      sessionKey: "slack:D1",
      messageId: event.ts,
      senderAliases: ["alice"],
      isGroup: false,
      metadata: {
        channelType: "im",
        teamId: "T1",
        senderName: "alice",
      },
    });
  });

  it("names only members of its own workspace (a Slack Connect guest may share a username)", async () => {
    const { fake } = await started();
    fake.users.set("U3", { name: "alice", team_id: "T-OTHER" });
    await fake.pushEvent(dmEvent("hi", { user: "U3", channel: "D3" }));
    const msg = await rig!.nextInbound(1);
    expect(msg.senderId).toBe("U3");
    expect(msg.senderAliases).toBeUndefined();
    await fake.pushCommand({ text: "help", user_id: "U3", channel_id: "D3", user_name: "alice" });
    expect((await rig!.nextInbound(2)).senderAliases).toBeUndefined();
    await fake.pushCommand({ text: "help", user_id: "U1", channel_id: "D1" });
    expect((await rig!.nextInbound(3)).senderAliases).toEqual(["alice"]);
  });

  it("acknowledges every delivery, also those it does not read, and takes a message sent twice once", async () => {
    const { fake } = await started();
    const submission = await fake.pushInteraction({ type: "view_submission", user: { id: "U1" }, view: {} });
    expect(typeof submission.envelope_id).toBe("string");
    const reaction = await fake.pushEvent({
      type: "reaction_added",
      user: "U1",
      reaction: "eyes",
      ts: nextTs(),
    });
    expect(typeof reaction.envelope_id).toBe("string");
    const event = dmEvent("once");
    await fake.pushEvent(event);
    await fake.pushEvent(event);
    // Handled in order in D1: once the marker is in, the second copy was dropped.
    await fake.pushEvent(dmEvent("marker"));
    await rig!.nextInbound(2);
    expect(rig!.inbound.map((m) => m.content)).toEqual(["once", "marker"]);
  });

  it("takes an event once when Slack sends its envelope again (the ack lost: retry_attempt 1, timeout)", async () => {
    const { fake } = await started();
    // Slack's 3 s, scaled down: the lost ack's envelope comes again after this long.
    fake.ackWindowMs = 100;
    fake.loseAcks = 1;
    await fake.pushEvent(dmEvent("again"));
    expect(fake.socketRetries).toBe(1);
    // Handled in order in D1: once the marker is in, the second delivery was dropped.
    await fake.pushEvent(dmEvent("marker"));
    await rig!.nextInbound(2);
    expect(rig!.inbound.map((m) => m.content)).toEqual(["again", "marker"]);
  });

  it("in a channel: ignores messages without a mention, takes a mention once (message + app_mention)", async () => {
    const { fake } = await started();
    await fake.pushEvent(channelMessage("just chatting"));
    const mention = channelMessage(`<@${BOT_USER_ID}> what is 2+2?`);
    await fake.pushEvent(mention);
    await fake.pushEvent(mentionEvent(mention));
    // C1's events are handled in arrival order: once a later mention is in, the copy was dropped.
    await fake.pushEvent(channelMessage(`<@${BOT_USER_ID}> marker`));
    await rig!.nextInbound(2);
    expect(rig!.inbound.map((m) => m.content)).toEqual(["what is 2+2?", "marker"]);
    const msg = rig!.inbound[0]!;
    expect(msg.content).toBe("what is 2+2?");
    expect(msg.sessionKey).toBe(`slack:C1:${mention.ts}`);
    expect(msg.messageId).toBe(mention.ts);
    expect(msg.isGroup).toBe(true);
    expect(msg.threadId).toBe(mention.ts);
  });

  it("takes the app_mention alone too (when message events are not subscribed)", async () => {
    const { fake } = await started();
    const mention = mentionEvent(channelMessage(`<@${BOT_USER_ID}> hi`));
    await fake.pushEvent(mention);
    expect((await rig!.nextInbound(1)).sessionKey).toBe(`slack:C1:${mention.ts}`);
  });

  it("follows up in a thread the bot was mentioned in, without another mention", async () => {
    const { fake } = await started();
    const parent = channelMessage(`<@${BOT_USER_ID}> start`);
    await fake.pushEvent(parent);
    await rig!.nextInbound(1);
    await fake.pushEvent(channelMessage("and one more thing", { thread_ts: parent.ts }));
    const follow = await rig!.nextInbound(2);
    expect(follow.content).toBe("and one more thing");
    expect(follow.sessionKey).toBe(`slack:C1:${parent.ts}`);
    expect(follow.threadId).toBe(parent.ts);
    expect(fake.callsTo("conversations.replies")).toHaveLength(0); // known from the mention
  });

  it("asks Slack whether the bot is part of an unknown thread (after a restart, say)", async () => {
    const { fake } = await started();
    const ours = nextTs();
    fake.addMessage("C1", { ts: ours, user: "U2", text: "a question" });
    fake.addMessage("C1", {
      ts: nextTs(),
      thread_ts: ours,
      user: BOT_USER_ID,
      bot_id: BOT_ID,
      text: "an answer",
    });
    const theirs = nextTs();
    fake.addMessage("C1", { ts: theirs, user: "U2", text: "people talking" });

    await fake.pushEvent(channelMessage("not for the bot", { thread_ts: theirs }));
    await fake.pushEvent(channelMessage("thanks, and?", { thread_ts: ours }));
    // Both threads are looked up in C1's order: once the second is in, the first was turned away.
    const msg = await rig!.nextInbound(1);
    expect(rig!.inbound).toHaveLength(1);
    expect(msg.content).toBe("thanks, and?");
    expect(msg.sessionKey).toBe(`slack:C1:${ours}`);
    expect(fake.callsTo("conversations.replies").map((c) => c.params.ts)).toEqual([theirs, ours]);
  });

  it("ignores its own messages, other bots and edits", async () => {
    const { fake } = await started({ groupPolicy: "open" });
    await fake.pushEvent(dmEvent("echo", { user: BOT_USER_ID, bot_id: BOT_ID }));
    await fake.pushEvent(channelMessage("beep", { user: "U7", bot_id: "B7" }));
    await fake.pushEvent(dmEvent("", { subtype: "bot_message", user: undefined, bot_id: "B7" }));
    await fake.pushEvent(dmEvent("", { subtype: "message_changed", user: undefined }));
    // A person after them in D1 and in C1: each channel's events are handled in arrival order, so once
    // both are in, everything before them was judged.
    await fake.pushEvent(dmEvent("a person"));
    await fake.pushEvent(channelMessage("a person in C1"));
    await rig!.nextInbound(2);
    expect(rig!.inbound.map((m) => m.content).sort()).toEqual(["a person", "a person in C1"]);
  });

  it("open policy takes channel messages; allowlist only in listed channels", async () => {
    const { fake } = await started({ groupPolicy: "allowlist", groupAllowFrom: ["C9"] });
    await fake.pushEvent(channelMessage(`<@${BOT_USER_ID}> in C1`));
    await fake.pushEvent(channelMessage("in C9, no mention", { channel: "C9" }));
    // Nothing in C1 can be taken to follow it; the channel policy turns a message away as it arrives
    // (routeEvent, before any queue), and events arrive in order: C9's, taken, came after C1's.
    expect((await rig!.nextInbound(1)).chatId).toBe("C9");
    expect(rig!.inbound).toHaveLength(1);
  });

  it("ignores DMs when nanobot's dm.enabled is false", async () => {
    const { fake } = await started({ dm: { enabled: false }, groupPolicy: "open" });
    await fake.pushEvent(dmEvent("hello?"));
    await fake.pushEvent(channelMessage("in the channel"));
    // No DM can be taken to follow it; dm.enabled turns a DM away as it arrives (routeEvent, before
    // any queue), and events arrive in order: C1's, taken, came after the DM.
    expect((await rig!.nextInbound(1)).chatId).toBe("C1");
    expect(rig!.inbound).toHaveLength(1);
  });

  it("downloads shared files with the bot token into the workspace, within the size limit", async () => {
    const { fake, workspace } = await started({}, { maxMediaBytes: 1000 });
    const small = fake.addFile("notes.txt", "remember the milk");
    const big = fake.addFile("huge.bin", Buffer.alloc(5000), "application/octet-stream");
    await fake.pushEvent(dmEvent("see attached", { subtype: "file_share", files: [small, big] }));
    const msg = await rig!.nextInbound(1);
    // Journaled before the downloads, since Slack has the event acked already.
    expect(rig!.reserved.map((m) => [m.content, m.media])).toEqual([
      [`see attached\n${INTERRUPTED_DOWNLOAD_NOTE}`, undefined],
    ]);
    // Slack said how large it is: the big one is never fetched, and the sender is told.
    expect(fake.downloads).toEqual([small.id]);
    await waitFor(() => fake.delivered().length === 1, undefined, "the too-large notice");
    expect(fake.delivered()[0]).toEqual({
      channel: "D1",
      text: "Sorry, I can't take files over 1000 bytes, so I didn't look at: huge.bin (5 KB).",
    });
    expect(msg.media).toHaveLength(1);
    expect(msg.media![0]!.startsWith(join(workspace, "media", "slack"))).toBe(true);
    expect(msg.media![0]!.endsWith("-notes.txt")).toBe(true);
    expect(await readFile(msg.media![0]!, "utf8")).toBe("remember the milk");
    expect(msg.content).toBe(
      'see attached\n[file "huge.bin" not downloaded: the file is larger than the 1000 bytes limit]',
    );
  });

  it("checks access before anything else: a refused sender's files are not fetched and get no reaction", async () => {
    const { fake, workspace, channel } = await started({ allowFrom: ["U1"] });
    const files = Array.from({ length: 3 }, (_, i) => fake.addFile(`big-${i}.bin`, Buffer.alloc(2000)));
    await fake.pushEvent(dmEvent("take these", { user: "U2", channel: "D2", subtype: "file_share", files }));
    // Handed on bare, so the manager can tell the sender how to get in.
    const msg = await rig!.nextInbound(1);
    expect(msg).toMatchObject({ senderId: "U2", content: "take these" });
    expect(msg.media).toBeUndefined();
    expect(rig!.reserved).toEqual([]);
    // An allowed message after it, in the same order of handling, proves the refused one is done.
    await fake.pushEvent(dmEvent("marker", { user: "U1", channel: "D2" }));
    const marker = await rig!.nextInbound(2);
    // The loop starts turns only for what reached it: the refused message gets none, so no reaction.
    channel.onTurn(turnOf("turnStart", marker, "t1"));
    await fake.waitForCalls("reactions.add", 1);
    expect(fake.downloads).toEqual([]);
    expect(fake.callsTo("files.info")).toEqual([]);
    expect(fake.callsTo("reactions.add").map((c) => c.params.timestamp)).toEqual([
      rig!.inbound[1]!.messageId,
    ]);
    await expect(readdir(join(workspace, "media", "slack"))).rejects.toThrow(/ENOENT/);
  });

  it("tells the model when Slack answers a file URL with its sign-in page (no files:read)", async () => {
    const { fake } = await started();
    const file = fake.addFile("report.pdf", "%PDF-1.4", "application/pdf");
    fake.signInPageForFiles = true;
    await fake.pushEvent(dmEvent("", { subtype: "file_share", files: [file] }));
    const msg = await rig!.nextInbound(1);
    expect(msg.media).toBeUndefined();
    expect(msg.content).toBe(
      '[file "report.pdf" could not be downloaded: the bot lacks the files:read scope]',
    );
  });

  it("turns /palaver commands into chat commands in the user's recent thread, acking at once", async () => {
    const { fake } = await started();
    const parent = channelMessage(`<@${BOT_USER_ID}> long job`);
    await fake.pushEvent(parent);
    await rig!.nextInbound(1);
    const ack = await fake.pushCommand({ text: "stop", user_id: "U1", channel_id: "C1" });
    expect(typeof ack.envelope_id).toBe("string");
    const stop = await rig!.nextInbound(2);
    expect(stop).toMatchObject({
      senderId: "U1",
      chatId: "C1",
      content: "/stop",
      sessionKey: `slack:C1:${parent.ts}`,
      threadId: parent.ts,
      metadata: { slashCommand: "/palaver" },
    });
    await fake.pushCommand({ text: "", user_id: "U2", channel_id: "C1" });
    expect(await rig!.nextInbound(3)).toMatchObject({
      content: "/help",
      sessionKey: "slack:C1",
      senderId: "U2",
    });
  });
});

describe("Slack Socket Mode: sending", () => {
  it("posts mrkdwn in the thread and splits long replies", async () => {
    const { fake, channel } = await started();
    const mention = channelMessage(`<@${BOT_USER_ID}> write a lot`);
    await fake.pushEvent(mention);
    const msg = await rig!.nextInbound(1);
    const long = Array.from({ length: 300 }, (_v, i) => `**line ${i}**: ${"words ".repeat(5)}`).join("\n");
    await channel.send({
      channel: "slack",
      chatId: "C1",
      content: long,
      threadId: msg.threadId,
      metadata: msg.metadata,
    });
    const posts = fake.posted();
    expect(posts.length).toBeGreaterThan(3);
    for (const post of posts) {
      expect(post.thread_ts).toBe(mention.ts);
      expect(post.text.length).toBeLessThanOrEqual(SLACK_MESSAGE_LIMIT);
    }
    expect(posts[0]!.text.startsWith("*line 0*: words")).toBe(true);
    expect(posts.map((p) => p.text).join("\n")).toContain("*line 299*");
  });

  it("uploads files with the current upload API into the thread", async () => {
    const { fake, channel, workspace } = await started();
    const path = join(workspace, "chart.png");
    await writeFile(path, Buffer.from([0x89, 0x50, 0x4e, 0x47, 1, 2, 3]));
    await channel.send({
      channel: "slack",
      chatId: "C1",
      content: "here it is",
      media: [path],
      threadId: "1700000000.000100",
    });
    expect(fake.callsTo("files.getUploadURLExternal")[0]!.params).toMatchObject({
      filename: "chart.png",
      length: "7",
    });
    expect(fake.callsTo("files.completeUploadExternal")[0]!.params).toMatchObject({
      channel_id: "C1",
      thread_ts: "1700000000.000100",
    });
    expect(fake.uploads[0]!.bytes).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 1, 2, 3]));
    expect(fake.uploads[0]).toMatchObject({
      filename: "chart.png",
      channelId: "C1",
      threadTs: "1700000000.000100",
    });
    expect(fake.posted()[0]).toEqual({ channel: "C1", text: "here it is", thread_ts: "1700000000.000100" });
  });

  it("fails a rate-limited reply at once with Slack's Retry-After, for the outbox to retry", async () => {
    const { fake, channel } = await started();
    fake.rateLimit("chat.postMessage", 120);
    const failed: unknown = await channel
      .send({ channel: "slack", chatId: "D1", content: "patience" })
      .catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(ChannelError);
    expect(failed).toMatchObject({
      platform: "slack",
      method: "chat.postMessage",
      code: "ratelimited",
      permanent: false,
      retryAfterMs: 120_000,
    });
    // Not retried inside the SDK (that would be an early retry, refused again): the outbox waits.
    expect(fake.callsTo("chat.postMessage")).toHaveLength(1);
    expect(fake.delivered()).toEqual([]);
  });

  it("waits out a short rate limit in the middle of a split reply instead of failing it", async () => {
    const { fake, channel } = await started();
    const long = Array.from({ length: 300 }, (_v, i) => `line ${i}: ${"words ".repeat(5)}`).join("\n");
    const sending = channel.send({ channel: "slack", chatId: "D1", content: long });
    await fake.waitForCalls("chat.postMessage", 1);
    fake.rateLimit("chat.postMessage", 1);
    await sending;
    const texts = fake.delivered().map((m) => m.text);
    expect(texts.length).toBeGreaterThan(2);
    expect(new Set(texts).size).toBe(texts.length); // no part twice
    expect(texts.join("\n")).toContain("line 299");
    // The part after the 429 waited out its Retry-After: sooner, it would have met another 429.
    expect(fake.earlyRetries).toEqual([]);
  });

  it.each([
    ["channel_not_found", true],
    ["is_archived", true],
    ["token_revoked", true],
    ["restricted_action", true],
    ["msg_too_long", true],
    ["internal_error", false],
    ["fatal_error", false],
  ])("marks Slack's %s as permanent: %s", async (code, permanent) => {
    const { fake, channel } = await started();
    fake.failNext("chat.postMessage", code);
    const failed: unknown = await channel
      .send({ channel: "slack", chatId: "D1", content: "hi" })
      .catch((e: unknown) => e);
    expect(failed).toMatchObject({ platform: "slack", method: "chat.postMessage", code, permanent });
  });

  it("fails a send with Slack's reason and what to do", async () => {
    const { fake, channel } = await started();
    fake.failNext("chat.postMessage", "not_in_channel");
    const failed: unknown = await channel
      .send({ channel: "slack", chatId: "C5", content: "hi" })
      .catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(ChannelError);
    expect(failed).toMatchObject({
      message:
        "Slack refused chat.postMessage: not_in_channel (invite the bot to the channel: /invite @palaver)",
      platform: "slack",
      method: "chat.postMessage",
      code: "not_in_channel",
      permanent: true,
    });
  });
});

describe("Slack Socket Mode: the receipt reaction", () => {
  it("is on the message from its turn's start to its end, then swapped for the done reaction", async () => {
    const { fake, channel } = await started();
    const event = dmEvent("hello");
    await fake.pushEvent(event);
    const msg = await rig!.nextInbound(1);
    expect(fake.callsTo("reactions.add")).toEqual([]); // taken, but no turn yet: nothing shown
    channel.onTurn(turnOf("turnStart", msg, "t1"));
    const reactions = () => [...(fake.reactions.get(`D1:${event.ts}`) ?? [])];
    await waitFor(() => reactions().includes("eyes"), undefined, "the receipt reaction");
    await channel.send({
      channel: "slack",
      chatId: "D1",
      content: "hi!",
      metadata: msg.metadata,
      turnId: "t1",
    });
    expect(reactions()).toEqual(["eyes"]); // a reply is not the end of the turn
    channel.onTurn(turnOf("turnEnd", msg, "t1"));
    await waitFor(() => reactions().includes("white_check_mark"), undefined, "the done reaction");
    expect(reactions()).toEqual(["white_check_mark"]);
  });

  it("stays while the turn runs when a reminder (a reply from no turn) goes to the same chat", async () => {
    const { fake, channel } = await started();
    const event = dmEvent("hello");
    await fake.pushEvent(event);
    const msg = await rig!.nextInbound(1);
    channel.onTurn(turnOf("turnStart", msg, "t1"));
    await fake.waitForCalls("reactions.add", 1);
    // A cron delivery carries the chat's metadata (messageId included) but no turn.
    await channel.send({
      channel: "slack",
      chatId: "D1",
      content: "Reminder: stretch",
      metadata: msg.metadata,
    });
    expect(fake.callsTo("reactions.remove")).toEqual([]);
    expect([...fake.reactions.get(`D1:${event.ts}`)!]).toEqual(["eyes"]);
  });

  it("swaps a receipt still there from before a restart (Slack says already_reacted)", async () => {
    const { fake, channel } = await started();
    const event = dmEvent("hello");
    fake.reactions.set(`D1:${event.ts}`, new Set(["eyes"]));
    await fake.pushEvent(event);
    const msg = await rig!.nextInbound(1);
    channel.onTurn(turnOf("turnStart", msg, "t1"));
    await fake.waitForCalls("reactions.add", 1);
    channel.onTurn(turnOf("turnEnd", msg, "t1"));
    await fake.waitForCalls("reactions.add", 2);
    expect([...fake.reactions.get(`D1:${event.ts}`)!]).toEqual(["white_check_mark"]);
  });

  it("is just removed at the end when doneEmoji is empty", async () => {
    const { fake, channel } = await started({ doneEmoji: "" });
    const event = dmEvent("hello");
    await fake.pushEvent(event);
    const msg = await rig!.nextInbound(1);
    channel.onTurn(turnOf("turnStart", msg, "t1"));
    await fake.waitForCalls("reactions.add", 1);
    channel.onTurn(turnOf("turnEnd", msg, "t1"));
    await fake.waitForCalls("reactions.remove", 1);
    expect(fake.reactions.get(`D1:${event.ts}`)?.size).toBe(0);
    expect(fake.callsTo("reactions.add")).toHaveLength(1);
  });
});

describe("Slack Socket Mode: audio clips", () => {
  it("transcribes a recorded clip through the configured /audio/transcriptions endpoint", async () => {
    const fake = await FakeSlack.start();
    const config = ConfigSchema.parse({
      providers: { whisper: { apiBase: fake.transcriptionBaseURL, apiKey: "k" } },
      transcription: { provider: "whisper", model: "whisper-large" },
    });
    rig = await slackRig({}, { fake, transcriber: createTranscriber(config)! });
    try {
      await rig.start();
      await fake.waitForConnections(1);
      fake.transcript = "remind me to buy milk";
      const clip = fake.addFile("audio_message.m4a", Buffer.from("fake m4a"), "audio/mp4", {
        subtype: "slack_audio",
      });
      await fake.pushEvent(dmEvent("", { subtype: "file_share", files: [clip] }));
      const msg = await rig.nextInbound(1);
      expect(msg.content).toBe("[audio clip, transcribed: remind me to buy milk]");
      expect(msg.media).toHaveLength(1);
      expect(fake.transcriptions).toHaveLength(1);
      expect(fake.transcriptions[0]).toMatchObject({ model: "whisper-large", size: 8 });
      expect(fake.transcriptions[0]!.fileName).toMatch(/audio_message\.m4a$/);
    } finally {
      await rig.cleanup();
      rig = undefined;
      await fake.close();
    }
  });
});
