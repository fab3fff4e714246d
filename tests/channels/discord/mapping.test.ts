import { describe, expect, it } from "vitest";
import {
  addressesBot,
  admitInteraction,
  admitMessage,
  interactionToInbound,
  readableMentions,
  sessionKeyFor,
  SLASH_COMMANDS,
  stripBotMention,
  toInbound,
  type DiscordInteractionView,
  type DiscordMessageView,
  type DiscordPolicy,
  type DiscordUserView,
} from "../../../src/channels/discord/mapping.js";

const BOT = "900";
const bot: DiscordUserView = { id: BOT, username: "palaver", bot: true };
const alice: DiscordUserView = { id: "100", username: "alice", displayName: "Alice A.", bot: false };
const bob: DiscordUserView = { id: "200", username: "bob", bot: false };

const policy = (over: Partial<DiscordPolicy> = {}): DiscordPolicy => ({
  botId: BOT,
  groupPolicy: "mention",
  groupAllowFrom: [],
  ...over,
});

function dm(over: Partial<DiscordMessageView> = {}): DiscordMessageView {
  return {
    id: "m1",
    type: 0,
    system: false,
    webhookId: null,
    channelId: "dm1",
    guildId: null,
    threadParentId: null,
    author: alice,
    content: "hello",
    mentions: [],
    attachments: [],
    referenced: null,
    ...over,
  };
}

const inGuild = (over: Partial<DiscordMessageView> = {}) => dm({ channelId: "c1", guildId: "g1", ...over });

describe("admitMessage", () => {
  it("takes every DM from a person, whatever the group policy", () => {
    for (const groupPolicy of ["mention", "open", "allowlist"] as const) {
      expect(admitMessage(dm(), policy({ groupPolicy }))).toEqual({ accept: true });
    }
  });

  it("ignores bots, webhooks, its own messages and system messages", () => {
    expect(admitMessage(dm({ author: bob, webhookId: "w1" }), policy())).toEqual({
      accept: false,
      reason: "from a bot",
    });
    expect(admitMessage(dm({ author: { ...bob, bot: true } }), policy())).toMatchObject({ accept: false });
    expect(admitMessage(dm({ author: bot }), policy())).toEqual({ accept: false, reason: "own message" });
    expect(admitMessage(dm({ type: 7 }), policy())).toEqual({ accept: false, reason: "system message" });
    expect(admitMessage(dm({ system: true }), policy())).toMatchObject({ accept: false });
  });

  it("in a guild under 'mention' takes a mention (both forms) or a reply to the bot only", () => {
    expect(admitMessage(inGuild({ content: "hi all" }), policy())).toEqual({
      accept: false,
      reason: "not mentioned",
    });
    expect(admitMessage(inGuild({ content: `<@${BOT}> hi` }), policy()).accept).toBe(true);
    expect(admitMessage(inGuild({ content: `hi <@!${BOT}>` }), policy()).accept).toBe(true);
    const replyToBot = inGuild({
      type: 19,
      content: "and?",
      referenced: { id: "r", author: bot, content: "x" },
    });
    expect(admitMessage(replyToBot, policy()).accept).toBe(true);
    const replyToBob = inGuild({
      type: 19,
      content: "and?",
      referenced: { id: "r", author: bob, content: "x" },
    });
    expect(admitMessage(replyToBob, policy()).accept).toBe(false);
    // Somebody else's mention, or an id that merely starts like the bot's, is not a mention of the bot.
    expect(admitMessage(inGuild({ content: `<@${BOT}1> hi` }), policy()).accept).toBe(false);
  });

  it("under 'open' takes every guild message; under 'allowlist' only in listed channels and their threads", () => {
    expect(admitMessage(inGuild({ content: "hi all" }), policy({ groupPolicy: "open" })).accept).toBe(true);
    const allowlist = policy({ groupPolicy: "allowlist", groupAllowFrom: ["c1"] });
    expect(admitMessage(inGuild({ content: "hi" }), allowlist).accept).toBe(true);
    expect(admitMessage(inGuild({ channelId: "c2", content: `<@${BOT}> hi` }), allowlist)).toEqual({
      accept: false,
      reason: "channel not in groupAllowFrom",
    });
    expect(
      admitMessage(inGuild({ channelId: "t9", threadParentId: "c1", content: "hi" }), allowlist).accept,
    ).toBe(true);
  });

  it("ignores a bare mention with nothing else, but not a mention with a file", () => {
    expect(admitMessage(inGuild({ content: `<@${BOT}>` }), policy())).toEqual({
      accept: false,
      reason: "empty",
    });
    const file = { id: "a", name: "a.txt", url: "http://x/a.txt", size: 1, contentType: "text/plain" };
    expect(admitMessage(inGuild({ content: `<@${BOT}>`, attachments: [file] }), policy()).accept).toBe(true);
  });
});

describe("mentions", () => {
  it("strips the bot's mention in both forms and tidies the spaces", () => {
    expect(stripBotMention(`<@${BOT}> /new`, BOT)).toBe("/new");
    expect(stripBotMention(`hey <@!${BOT}>   what's up <@${BOT}>`, BOT)).toBe("hey what's up");
    expect(stripBotMention("no mention\n\nsecond line", BOT)).toBe("no mention\n\nsecond line");
  });

  it("turns other people's mentions into @names", () => {
    expect(readableMentions("ask <@200> or <@!200>", [bob])).toBe("ask @bob or @bob");
    expect(addressesBot(inGuild({ content: "ask <@200>" }), BOT)).toBe(false);
  });
});

describe("toInbound", () => {
  it("builds the bus message of a DM: session per channel, sender names and aliases", () => {
    expect(toInbound(dm(), policy())).toEqual({
      channel: "discord",
      senderId: "100",
      chatId: "dm1",
      content: "hello",
      sessionKey: "discord:dm1",
      messageId: "m1",
      senderAliases: ["alice"],
      isGroup: false,
      metadata: {
        channelId: "dm1",
        guildId: null,
        senderName: "Alice A.",
      },
    });
  });

  it("gives a thread its own session and says so: threadId, and the parent in the metadata", () => {
    const msg = toInbound(
      inGuild({ channelId: "t9", threadParentId: "c1", content: `<@${BOT}> go` }),
      policy(),
    );
    expect(msg.chatId).toBe("t9");
    expect(msg.sessionKey).toBe("discord:t9");
    expect(msg.isGroup).toBe(true);
    expect(msg.threadId).toBe("t9");
    expect(msg.metadata).toMatchObject({ parentId: "c1", guildId: "g1" });
    expect(msg.content).toBe("go");
    expect(sessionKeyFor({ channelId: "c1", guildId: "g1", threadParentId: null })).toBe("discord:c1");
  });

  it("keeps a command after a mention a command", () => {
    expect(toInbound(inGuild({ content: `<@${BOT}> /stop` }), policy()).content).toBe("/stop");
  });

  it("puts the replied-to text before the message, shortened", () => {
    const long = "x".repeat(1000);
    const reply = toInbound(
      dm({ type: 19, content: "why?", referenced: { id: "r", author: bob, content: long } }),
      policy(),
    );
    expect(reply.content).toBe(`[In reply to @bob: "${"x".repeat(600)}…"]\n\nwhy?`);
    const toBot = toInbound(
      dm({ content: "more", referenced: { id: "r", author: bot, content: "It is 4." } }),
      policy(),
    );
    expect(toBot.content).toBe('[In reply to your earlier message: "It is 4."]\n\nmore');
  });

  it("never offers an all-digit username as an alias (it could pass for another person's id)", () => {
    const digits = toInbound(dm({ author: { id: "300", username: "100", bot: false } }), policy());
    expect(digits.senderAliases).toEqual([]);
  });
});

describe("slash commands", () => {
  const view = (over: Partial<DiscordInteractionView> = {}): DiscordInteractionView => ({
    id: "i1",
    commandName: "status",
    args: "",
    channelId: "c1",
    guildId: "g1",
    threadParentId: null,
    user: alice,
    ...over,
  });

  it("registers the chat commands with short descriptions", () => {
    expect(SLASH_COMMANDS.map((c) => c.name).sort()).toEqual([
      "help",
      "memory",
      "new",
      "status",
      "stop",
      "usage",
    ]);
    for (const c of SLASH_COMMANDS) expect(c.description.length).toBeGreaterThan(0);
    for (const c of SLASH_COMMANDS) expect(c.description.length).toBeLessThanOrEqual(100);
  });

  it("takes them in DMs and guilds (they are addressed to the bot), limited by the allowlist", () => {
    expect(admitInteraction(view(), policy())).toEqual({ accept: true });
    expect(admitInteraction(view({ guildId: null }), policy({ groupPolicy: "allowlist" }))).toEqual({
      accept: true,
    });
    expect(
      admitInteraction(view(), policy({ groupPolicy: "allowlist", groupAllowFrom: ["c2"] })).accept,
    ).toBe(false);
    expect(admitInteraction(view({ commandName: "deploy" }), policy())).toEqual({
      accept: false,
      reason: "unknown command",
    });
  });

  it("becomes the same text a typed command would be, with the interaction id to answer through", () => {
    const msg = interactionToInbound(view({ channelId: "t9", threadParentId: "c1" }));
    expect(msg).toMatchObject({
      channel: "discord",
      senderId: "100",
      chatId: "t9",
      content: "/status",
      sessionKey: "discord:t9",
      senderAliases: ["alice"],
      threadId: "t9",
      interactionId: "i1",
      metadata: { parentId: "c1" },
    });
    expect(interactionToInbound(view({ commandName: "new", args: "now" })).content).toBe("/new now");
  });
});
