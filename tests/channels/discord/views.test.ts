import type { APIMessage, APIUser } from "@discordjs/core";
import { describe, expect, it } from "vitest";
import {
  isSendable,
  messageView,
  sentAlongReference,
  threadParentOf,
  type MessagePayload,
} from "../../../src/channels/discord/views.js";

const alice: APIUser = {
  id: "11",
  username: "alice",
  global_name: "Alice",
  discriminator: "0",
  avatar: null,
};

function payload(extra: Partial<MessagePayload> = {}): MessagePayload {
  return {
    id: "100",
    channel_id: "200",
    author: alice,
    content: "hi",
    timestamp: "2026-01-01T00:00:00.000Z",
    edited_timestamp: null,
    tts: false,
    mention_everyone: false,
    mentions: [],
    mention_roles: [],
    attachments: [],
    embeds: [],
    pinned: false,
    type: 0,
    ...extra,
  };
}

describe("Discord payload views", () => {
  it("reads a guild message's author, attachments and voice flag from the raw payload", () => {
    const view = messageView(
      payload({
        guild_id: "300",
        flags: 1 << 13,
        attachments: [
          {
            id: "9",
            filename: "v.ogg",
            size: 5,
            url: "http://x/v.ogg",
            proxy_url: "",
            content_type: "audio/ogg",
          },
        ],
      }),
      "250",
      null,
    );
    expect(view).toMatchObject({
      channelId: "200",
      guildId: "300",
      threadParentId: "250",
      system: false,
      author: { id: "11", username: "alice", displayName: "Alice", bot: false },
      attachments: [{ name: "v.ogg", contentType: "audio/ogg", size: 5 }],
      voiceMessage: true,
      referenced: null,
    });
    expect(messageView(payload({ type: 7 }), null, null).system).toBe(true);
  });

  it("takes the replied-to message Discord sent along, and asks for it only in the same channel", () => {
    const ref = payload({ id: "99", content: "earlier" }) as APIMessage;
    expect(sentAlongReference(payload())).toBeNull();
    expect(
      sentAlongReference(
        payload({ message_reference: { message_id: "99", channel_id: "200" }, referenced_message: ref }),
      ),
    ).toBe(ref);
    expect(sentAlongReference(payload({ message_reference: { message_id: "99", channel_id: "200" } }))).toBe(
      undefined,
    );
    expect(sentAlongReference(payload({ message_reference: { message_id: "99", channel_id: "201" } }))).toBe(
      null,
    );
  });

  it("knows threads and channels that take no messages", () => {
    expect(threadParentOf({ type: 11, parent_id: "200" })).toBe("200");
    expect(threadParentOf({ type: 0, parent_id: "category" })).toBeNull();
    expect(isSendable(1)).toBe(true);
    expect(isSendable(4)).toBe(false); // a category
    expect(isSendable(15)).toBe(false); // a forum
  });
});
