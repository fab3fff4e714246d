import { describe, expect, it } from "vitest";
import {
  commandAfterMention,
  eventKey,
  isSlackFileUrl,
  replyThreadOf,
  routeEvent,
  sessionKeyFor,
  slashCommandText,
  slashCommandToInbound,
  SlackMessageEventSchema,
  stripMention,
  threadTsOf,
  toInbound,
  type SlackMessageEvent,
  type SlackPolicy,
} from "../../../src/channels/slack/mapping.js";

const bot = { userId: "UBOT", botId: "BBOT" };
const policy: SlackPolicy = {
  groupPolicy: "mention",
  groupAllowFrom: [],
  replyInThread: true,
  dmEnabled: true,
};

function event(extra: Partial<SlackMessageEvent> = {}): SlackMessageEvent {
  return SlackMessageEventSchema.parse({
    type: "message",
    channel: "C1",
    channel_type: "channel",
    user: "U1",
    text: "hello",
    ts: "100.1",
    ...extra,
  });
}
const dm = (extra: Partial<SlackMessageEvent> = {}) => event({ channel: "D1", channel_type: "im", ...extra });

describe("routeEvent", () => {
  it("takes every DM, unless dm.enabled is false", () => {
    expect(routeEvent(dm(), bot, policy)).toEqual({ kind: "accept", why: "dm" });
    expect(routeEvent(dm(), bot, { ...policy, dmEnabled: false }).kind).toBe("ignore");
  });

  it("never takes the bot's own messages, other bots' messages or non-user subtypes", () => {
    expect(routeEvent(dm({ user: "UBOT" }), bot, policy).kind).toBe("ignore");
    expect(routeEvent(dm({ bot_id: "BOTHER", user: "U9" }), bot, policy).kind).toBe("ignore");
    expect(routeEvent(dm({ subtype: "bot_message", user: undefined }), bot, policy).kind).toBe("ignore");
    for (const subtype of ["message_changed", "message_deleted", "channel_join"]) {
      expect(routeEvent(dm({ subtype }), bot, policy)).toEqual({ kind: "ignore", why: `subtype ${subtype}` });
    }
    expect(routeEvent(dm({ user: undefined }), bot, policy).kind).toBe("ignore");
  });

  it("takes file shares and thread broadcasts from people", () => {
    expect(routeEvent(dm({ subtype: "file_share" }), bot, policy).kind).toBe("accept");
    expect(routeEvent(event({ subtype: "thread_broadcast", text: "<@UBOT> hi" }), bot, policy).kind).toBe(
      "accept",
    );
  });

  it("mention policy: app_mention and messages naming the bot are taken, others are not", () => {
    expect(routeEvent(event({ type: "app_mention", channel_type: undefined }), bot, policy)).toEqual({
      kind: "accept",
      why: "mention",
    });
    expect(routeEvent(event({ text: "hey <@UBOT> look" }), bot, policy).kind).toBe("accept");
    expect(routeEvent(event({ text: "hey <@UBOT|palaver> look" }), bot, policy).kind).toBe("accept");
    expect(routeEvent(event({ text: "hey <@U2> look" }), bot, policy)).toEqual({
      kind: "ignore",
      why: "not mentioned",
    });
  });

  it("mention policy: a thread reply without mention depends on whether the bot is in the thread", () => {
    const reply = event({ ts: "200.2", thread_ts: "100.1", text: "and then?" });
    expect(routeEvent(reply, bot, policy)).toEqual({ kind: "checkThread", threadTs: "100.1" });
    expect(routeEvent(reply, bot, policy, true)).toEqual({ kind: "accept", why: "thread" });
    expect(routeEvent(reply, bot, policy, false).kind).toBe("ignore");
    // A thread's parent message itself is not a reply.
    expect(routeEvent(event({ ts: "100.1", thread_ts: "100.1" }), bot, policy).kind).toBe("ignore");
  });

  it("open policy takes every channel message; allowlist only those of listed channels", () => {
    expect(routeEvent(event(), bot, { ...policy, groupPolicy: "open" })).toEqual({
      kind: "accept",
      why: "open",
    });
    const allowlist: SlackPolicy = { ...policy, groupPolicy: "allowlist", groupAllowFrom: ["C1"] };
    expect(routeEvent(event(), bot, allowlist)).toEqual({ kind: "accept", why: "allowlist" });
    expect(routeEvent(event({ channel: "C2", text: "<@UBOT> hi" }), bot, allowlist).kind).toBe("ignore");
  });

  it("treats an app_mention without channel_type by its channel id", () => {
    const mentionInDm = event({ type: "app_mention", channel: "D5", channel_type: undefined });
    expect(routeEvent(mentionInDm, bot, policy)).toEqual({ kind: "accept", why: "dm" });
  });
});

describe("mentions and commands", () => {
  it("strips the bot mention wherever it is, keeping other mentions", () => {
    expect(stripMention("<@UBOT> what is up?", "UBOT")).toBe("what is up?");
    expect(stripMention("hey <@UBOT>, ask <@U2> too", "UBOT")).toBe("hey ask <@U2> too");
    expect(stripMention("<@UBOT|palaver>: hi", "UBOT")).toBe("hi");
  });

  it("reads a lone command word right after the mention as that command", () => {
    expect(commandAfterMention("<@UBOT> stop", "UBOT")).toBe("/stop");
    expect(commandAfterMention("<@UBOT>  New!", "UBOT")).toBe("/new");
    expect(commandAfterMention("<@UBOT>: /status", "UBOT")).toBe("/status");
    expect(commandAfterMention("<@UBOT> help me write a poem", "UBOT")).toBeNull();
    expect(commandAfterMention("please <@UBOT> stop", "UBOT")).toBeNull();
    expect(commandAfterMention("<@UBOT> dance", "UBOT")).toBeNull();
    expect(commandAfterMention("<@U2> stop", "UBOT")).toBeNull();
  });

  it("maps /palaver arguments to the chat commands", () => {
    expect(slashCommandText("")).toBe("/help");
    expect(slashCommandText("stop")).toBe("/stop");
    expect(slashCommandText("  NEW  ")).toBe("/new");
    expect(slashCommandText("status please")).toBe("/status please");
    expect(slashCommandText("/help")).toBe("/help");
    expect(slashCommandText("pairing approve k7m2qx9b")).toBe("/pairing approve k7m2qx9b");
    expect(slashCommandText("what is the weather")).toBe("what is the weather");
  });
});

describe("threads and sessions", () => {
  it("replies in a new thread under a top-level channel message when replyInThread", () => {
    expect(replyThreadOf(event({ ts: "1.1" }), policy)).toBe("1.1");
    expect(replyThreadOf(event({ ts: "1.1" }), { ...policy, replyInThread: false })).toBeUndefined();
    expect(replyThreadOf(event({ ts: "2.2", thread_ts: "1.1" }), { ...policy, replyInThread: false })).toBe(
      "1.1",
    );
    expect(replyThreadOf(dm({ ts: "1.1" }), policy)).toBeUndefined();
    expect(replyThreadOf(dm({ ts: "2.2", thread_ts: "1.1" }), policy)).toBe("1.1");
  });

  it("keys sessions per DM and per channel thread", () => {
    expect(sessionKeyFor("D1", true, "1.1")).toBe("slack:D1");
    expect(sessionKeyFor("C1", false, "1.1")).toBe("slack:C1:1.1");
    expect(sessionKeyFor("C1", false, undefined)).toBe("slack:C1");
  });

  it("dedupes message and app_mention of one message by channel and ts", () => {
    expect(eventKey(event({ ts: "5.5" }))).toBe(eventKey(event({ type: "app_mention", ts: "5.5" })));
    expect(eventKey(event({ ts: "5.5" }))).not.toBe(eventKey(event({ ts: "5.6" })));
  });

  it("reads the thread back from an outbound message's threadId, and only a real timestamp", () => {
    expect(threadTsOf({ threadId: "1700000000.000100" })).toBe("1700000000.000100");
    expect(threadTsOf({ threadId: "../x" })).toBeUndefined();
    expect(threadTsOf({})).toBeUndefined();
  });
});

describe("toInbound", () => {
  it("maps a DM to a message of the DM's session", () => {
    expect(toInbound(dm({ text: "hi &amp; <https://x.io|x>", ts: "9.9", team: "T1" }), bot, policy)).toEqual({
      channel: "slack",
      senderId: "U1",
      chatId: "D1",
      content: "hi & x (https://x.io)",
      sessionKey: "slack:D1",
      messageId: "9.9",
      isGroup: false,
      metadata: { channelType: "im", teamId: "T1" },
    });
  });

  it("maps a channel mention to its own thread session, mention stripped, sender name as alias", () => {
    const msg = toInbound(event({ text: "<@UBOT> summarize this", ts: "3.3" }), bot, policy, {
      senderName: "alice",
    });
    expect(msg).toMatchObject({
      chatId: "C1",
      content: "summarize this",
      sessionKey: "slack:C1:3.3",
      messageId: "3.3",
      senderAliases: ["alice"],
      isGroup: true,
      threadId: "3.3",
      metadata: {
        senderName: "alice",
      },
    });
  });

  it("maps a thread reply to the thread's session", () => {
    const msg = toInbound(event({ text: "more", ts: "4.4", thread_ts: "3.3" }), bot, policy);
    expect(msg?.sessionKey).toBe("slack:C1:3.3");
    expect(msg?.messageId).toBe("4.4");
    expect(msg?.threadId).toBe("3.3");
  });

  it("turns `@bot stop` into /stop", () => {
    expect(toInbound(event({ text: "<@UBOT> stop" }), bot, policy)?.content).toBe("/stop");
  });

  it("keeps a message with files and no text (its files are fetched later)", () => {
    const file = { id: "F1", name: "a.pdf" };
    const msg = toInbound(dm({ text: "", subtype: "file_share", files: [file] }), bot, policy);
    expect(msg?.content).toBe("");
    expect(msg?.media).toBeUndefined();
  });

  it("returns null when there is nothing to say", () => {
    expect(toInbound(event({ text: "<@UBOT>" }), bot, policy)).toBeNull();
    expect(toInbound(dm({ user: undefined }), bot, policy)).toBeNull();
  });
});

describe("slashCommandToInbound", () => {
  const cmd = { command: "/palaver", text: "stop", user_id: "U1", user_name: "alice", channel_id: "C1" };

  it("goes to the thread the user last talked to the bot in", () => {
    expect(slashCommandToInbound(cmd, "3.3", "alice")).toMatchObject({
      senderId: "U1",
      chatId: "C1",
      content: "/stop",
      sessionKey: "slack:C1:3.3",
      senderAliases: ["alice"],
      threadId: "3.3",
      metadata: { slashCommand: "/palaver" },
    });
  });

  it("without a recent thread, to the channel; in a DM, to the DM", () => {
    expect(slashCommandToInbound(cmd).sessionKey).toBe("slack:C1");
    // The payload's user_name is never an alias by itself (the adapter looks names up).
    expect(slashCommandToInbound(cmd).senderAliases).toBeUndefined();
    expect(slashCommandToInbound(cmd).threadId).toBeUndefined();
    const inDm = slashCommandToInbound({ ...cmd, channel_id: "D1", channel_name: "directmessage" }, "3.3");
    expect(inDm.sessionKey).toBe("slack:D1");
    expect(inDm.threadId).toBeUndefined();
  });
});

describe("isSlackFileUrl", () => {
  it("sends the bot token only to Slack's hosts or the configured API host", () => {
    expect(isSlackFileUrl("https://files.slack.com/files-pri/T1-F1/a.txt", "")).toBe(true);
    expect(isSlackFileUrl("http://files.slack.com/files-pri/T1-F1/a.txt", "")).toBe(false);
    expect(isSlackFileUrl("https://files.slack.com.evil.io/a", "")).toBe(false);
    expect(isSlackFileUrl("https://evil.io/a", "")).toBe(false);
    expect(isSlackFileUrl("http://127.0.0.1:5000/files-pri/x", "http://127.0.0.1:5000/api/")).toBe(true);
    expect(isSlackFileUrl("http://127.0.0.1:5001/files-pri/x", "http://127.0.0.1:5000/api/")).toBe(false);
    expect(isSlackFileUrl("not a url", "")).toBe(false);
  });
});
