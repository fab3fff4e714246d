import { ChannelType, MessageFlags } from "discord.js";
import { describe, expect, it } from "vitest";
import {
  buttonView,
  interactionView,
  messageView,
  threadParentOf,
  type MessageLike,
  type UserLike,
} from "../../../src/channels/discord/views.js";

const alice: UserLike = { id: "11", username: "alice", globalName: "Alice", bot: false };

/** The fields of a discord.js Message that the view reads (Collections are read through values()). */
function message(extra: Partial<MessageLike> & { flagBits?: number } = {}): MessageLike {
  const { flagBits = 0, ...rest } = extra;
  return {
    id: "100",
    type: 0,
    system: false,
    webhookId: null,
    channelId: "200",
    guildId: null,
    author: alice,
    content: "hi",
    mentions: { users: new Map<string, UserLike>() },
    attachments: new Map(),
    flags: { has: (bit: MessageFlags) => (flagBits & bit) !== 0 },
    ...rest,
  };
}

describe("Discord views of discord.js structures", () => {
  it("reads a guild message's author, attachments, voice flag and thread from the message", () => {
    const view = messageView(
      message({
        guildId: "300",
        flagBits: MessageFlags.IsVoiceMessage,
        attachments: new Map([
          ["9", { id: "9", name: "v.ogg", size: 5, url: "http://x/v.ogg", contentType: "audio/ogg" }],
        ]),
      }),
      { type: ChannelType.PublicThread, parentId: "250" },
      null,
    );
    expect(view).toMatchObject({
      id: "100",
      channelId: "200",
      guildId: "300",
      threadParentId: "250",
      system: false,
      author: { id: "11", username: "alice", displayName: "Alice", bot: false },
      attachments: [{ name: "v.ogg", contentType: "audio/ogg", size: 5 }],
      voiceMessage: true,
      referenced: null,
    });
    expect(messageView(message({ type: 7, system: true }), null, null).system).toBe(true);
  });

  it("carries the replied-to message and other people's mentions", () => {
    const bob: UserLike = { id: "12", username: "bob", globalName: null, bot: false };
    const view = messageView(message({ mentions: { users: new Map([["12", bob]]) } }), null, {
      id: "99",
      author: bob,
      content: "earlier",
    });
    expect(view.mentions).toEqual([{ id: "12", username: "bob", displayName: null, bot: false }]);
    expect(view.referenced).toEqual({
      id: "99",
      author: { id: "12", username: "bob", displayName: null, bot: false },
      content: "earlier",
    });
  });

  it("knows threads and their parents; other channels have none", () => {
    expect(threadParentOf({ type: ChannelType.PublicThread, parentId: "200" })).toBe("200");
    expect(threadParentOf({ type: ChannelType.GuildText, parentId: "category" })).toBeNull();
  });

  it("reads where a slash command or a button press happened and who acted", () => {
    const place = {
      id: "7",
      channelId: "201",
      guildId: "300",
      channel: { type: ChannelType.PrivateThread, parentId: "200" },
      user: alice,
    };
    expect(interactionView({ ...place, commandName: "new" })).toEqual({
      id: "7",
      commandName: "new",
      args: "",
      channelId: "201",
      guildId: "300",
      threadParentId: "200",
      user: { id: "11", username: "alice", displayName: "Alice", bot: false },
    });
    expect(buttonView({ ...place, channel: null, customId: "q:1:2" })).toMatchObject({
      customId: "q:1:2",
      threadParentId: null,
    });
  });
});
