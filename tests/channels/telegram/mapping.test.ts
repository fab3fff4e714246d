import type { ChatMemberUpdated, Message } from "grammy/types";
import { describe, expect, it } from "vitest";
import {
  acceptedInGroup,
  attachmentsOf,
  commandOf,
  leftPrivateChat,
  mapMessage,
  mentionsBot,
  mergeAlbum,
  replyContext,
  replyTarget,
  sessionKeyFor,
  stripBotMention,
  type GroupRules,
} from "../../../src/channels/telegram/mapping.js";

const BOT = { id: 999, username: "palaver_bot" };
const MENTION: GroupRules = { groupPolicy: "mention", groupAllowFrom: [] };
const ADA = { id: 42, is_bot: false, first_name: "Ada", last_name: "L", username: "ada" };
const GROUP = { id: -1001, type: "supergroup" as const, title: "Team" };

function msg(fields: Partial<Message> & Record<string, unknown>): Message {
  return {
    message_id: 10,
    date: 1,
    chat: { id: 42, type: "private", first_name: "Ada" },
    from: ADA,
    ...fields,
  };
}

function mention(text: string, name = "@palaver_bot") {
  const offset = text.indexOf(name);
  return { text, entities: [{ type: "mention" as const, offset, length: name.length }] };
}

describe("private chats", () => {
  it("maps a text message: ids as strings, session per chat, metadata to reply with", () => {
    const m = mapMessage(msg({ text: "hello" }), BOT, MENTION)!;
    expect(m.inbound).toEqual({
      channel: "telegram",
      senderId: "42",
      chatId: "42",
      content: "hello",
      sessionKey: "telegram:42",
      messageId: "10",
      senderAliases: ["@ada"],
      isGroup: false,
      metadata: { chatType: "private" },
    });
    expect(m.attachments).toEqual([]);
    expect(m.isStart).toBe(false);
  });

  it("ignores bots, the bot itself, channel posts and empty service messages", () => {
    expect(mapMessage(msg({ text: "x", from: { ...ADA, is_bot: true } }), BOT, MENTION)).toBeNull();
    expect(mapMessage(msg({ text: "x", from: { ...ADA, id: BOT.id } }), BOT, MENTION)).toBeNull();
    expect(
      mapMessage(msg({ text: "x", chat: { id: -5, type: "channel", title: "c" } }), BOT, MENTION),
    ).toBeNull();
    expect(mapMessage(msg({ new_chat_members: [ADA] }), BOT, MENTION)).toBeNull();
    expect(mapMessage(msg({ text: "x", from: undefined }), BOT, MENTION)).toBeNull();
  });

  it("recognises /start (also addressed to the bot) and leaves other commands as text", () => {
    expect(mapMessage(msg({ text: "/start" }), BOT, MENTION)!.isStart).toBe(true);
    expect(mapMessage(msg({ text: "/start@palaver_bot payload" }), BOT, MENTION)!.isStart).toBe(true);
    expect(mapMessage(msg({ text: "/new" }), BOT, MENTION)!.inbound.content).toBe("/new");
    expect(commandOf("/new@Palaver_Bot now")).toEqual({ name: "new", target: "Palaver_Bot" });
    expect(commandOf("not /a command")).toBeNull();
  });

  it("keeps a command alone at the start, even as a reply", () => {
    const replied = msg({ from: { id: BOT.id, is_bot: true, first_name: "P" }, text: "long answer" });
    expect(
      mapMessage(msg({ text: "/stop", reply_to_message: replied as never }), BOT, MENTION)!.inbound.content,
    ).toBe("/stop");
  });

  it("puts location, contact, sticker and forwards into the text", () => {
    expect(
      mapMessage(msg({ location: { latitude: 1.5, longitude: 2 } }), BOT, MENTION)!.inbound.content,
    ).toBe("[Location: 1.5, 2]");
    expect(
      mapMessage(msg({ contact: { first_name: "Bob", phone_number: "+1" } }), BOT, MENTION)!.inbound.content,
    ).toBe("[Contact: Bob, +1]");
    expect(
      mapMessage(
        msg({ text: "look", forward_origin: { type: "hidden_user", sender_user_name: "Eve", date: 1 } }),
        BOT,
        MENTION,
      )!.inbound.content,
    ).toBe("[Forwarded from Eve]\nlook");
  });
});

describe("groups", () => {
  const inGroup = (fields: Partial<Message> & Record<string, unknown>) => msg({ chat: GROUP, ...fields });

  it("mention policy: ignores plain chatter, answers mentions, replies to the bot and commands", () => {
    expect(mapMessage(inGroup({ text: "just chatting" }), BOT, MENTION)).toBeNull();
    expect(mapMessage(inGroup(mention("hey @palaver_bot what's up")), BOT, MENTION)!.inbound.content).toBe(
      "hey what's up",
    );
    const replyToBot = inGroup({
      text: "and then?",
      reply_to_message: msg({ from: { id: BOT.id, is_bot: true, first_name: "P" }, text: "first" }) as never,
    });
    expect(mapMessage(replyToBot, BOT, MENTION)!.inbound.content).toBe(
      "[Reply to your earlier message: first]\nand then?",
    );
    expect(mapMessage(inGroup({ text: "/new@palaver_bot" }), BOT, MENTION)!.inbound.content).toBe("/new");
    expect(mapMessage(inGroup({ text: "/status" }), BOT, MENTION)!.inbound.content).toBe("/status");
  });

  it("never takes a command addressed to another bot", () => {
    expect(
      mapMessage(inGroup({ text: "/new@other_bot" }), BOT, { groupPolicy: "open", groupAllowFrom: [] }),
    ).toBeNull();
  });

  it("a reply to someone else is not a reply to the bot", () => {
    const reply = inGroup({
      text: "ok",
      reply_to_message: msg({ from: { ...ADA, id: 7 }, text: "x" }) as never,
    });
    expect(mapMessage(reply, BOT, MENTION)).toBeNull();
  });

  it("finds mentions by entity (any case) and by text when entities are missing; not @palaver_bot2", () => {
    expect(mentionsBot(inGroup(mention("hi @Palaver_Bot", "@Palaver_Bot")), BOT)).toBe(true);
    expect(mentionsBot(inGroup({ text: "hi @palaver_bot!" }), BOT)).toBe(true);
    expect(mentionsBot(inGroup({ text: "hi @palaver_bot2" }), BOT)).toBe(false);
    expect(mentionsBot(inGroup({ text: "mail x@palaver_bot.com" }), BOT)).toBe(false);
    expect(
      mentionsBot(
        inGroup({
          text: "hi Pal",
          entities: [
            {
              type: "text_mention",
              offset: 3,
              length: 3,
              user: { id: BOT.id, is_bot: true, first_name: "Pal" },
            },
          ],
        }),
        BOT,
      ),
    ).toBe(true);
    expect(mentionsBot(inGroup({ caption: "photo for @palaver_bot", photo: [] }), BOT)).toBe(true);
  });

  it("open and allowlist policies", () => {
    expect(acceptedInGroup(inGroup({ text: "x" }), BOT, { groupPolicy: "open", groupAllowFrom: [] })).toBe(
      true,
    );
    expect(
      acceptedInGroup(inGroup({ text: "x" }), BOT, { groupPolicy: "allowlist", groupAllowFrom: ["-1001"] }),
    ).toBe(true);
    expect(
      acceptedInGroup(inGroup({ text: "x" }), BOT, { groupPolicy: "allowlist", groupAllowFrom: ["-2"] }),
    ).toBe(false);
  });

  it("strips the bot's @username from mentions and command suffixes only", () => {
    expect(stripBotMention("@palaver_bot, summarise this", "palaver_bot")).toBe("summarise this");
    expect(stripBotMention("ask @PALAVER_BOT and @ada", "palaver_bot")).toBe("ask and @ada");
    expect(stripBotMention("/new@palaver_bot", "palaver_bot")).toBe("/new");
    expect(stripBotMention("/stop@palaver_bot now", "palaver_bot")).toBe("/stop now");
    expect(stripBotMention("@palaver_bot2 hi", "palaver_bot")).toBe("@palaver_bot2 hi");
  });

  it("each group is a session; each forum topic one of its own, with its thread id for replies", () => {
    const plain = mapMessage(inGroup({ text: "/help" }), BOT, MENTION)!;
    expect(plain.inbound.sessionKey).toBe("telegram:-1001");
    expect(plain.inbound.isGroup).toBe(true);
    expect(plain.inbound.metadata).toMatchObject({ chatType: "supergroup" });
    const topic = mapMessage(
      inGroup({
        text: "/help",
        message_thread_id: 77,
        is_topic_message: true,
        // Telegram sets the topic's first message as reply_to_message on every message in it.
        reply_to_message: msg({ message_id: 77, forum_topic_created: { name: "T", icon_color: 1 } }) as never,
      }),
      BOT,
      MENTION,
    )!;
    expect(topic.inbound.sessionKey).toBe("telegram:-1001:77");
    expect(topic.inbound.threadId).toBe("77");
    expect(topic.inbound.metadata).not.toHaveProperty("threadId");
    expect(topic.inbound.content).toBe("/help"); // the topic root is not shown as a reply
    // A reply thread in a non-forum group is not a topic.
    const notTopic = mapMessage(inGroup({ text: "/help", message_thread_id: 5 }), BOT, MENTION)!;
    expect(notTopic.inbound.sessionKey).toBe("telegram:-1001");
    expect(notTopic.inbound.threadId).toBeUndefined();
    expect(sessionKeyFor(1, 2)).toBe("telegram:1:2");
  });
});

describe("reply context", () => {
  it("quotes the replied-to text, or the part the user selected, shortened", () => {
    const replied = msg({
      from: { ...ADA, id: 7, first_name: "Bob", last_name: undefined },
      text: "the original text",
    }) as never;
    expect(replyContext(msg({ text: "x", reply_to_message: replied }), BOT)).toBe(
      "[Reply to Bob: the original text]",
    );
    expect(
      replyContext(
        msg({ text: "x", reply_to_message: replied, quote: { text: "original", position: 4 } }),
        BOT,
      ),
    ).toBe("[Reply to Bob: original]");
    const long = msg({ from: ADA, text: "y".repeat(1000) }) as never;
    expect(replyContext(msg({ text: "x", reply_to_message: long }), BOT)!.length).toBeLessThan(340);
    const photo = msg({
      from: ADA,
      photo: [{ file_id: "p", file_unique_id: "u", width: 1, height: 1 }],
    }) as never;
    expect(replyContext(msg({ text: "x", reply_to_message: photo }), BOT)).toBe("[Reply to Ada L: a photo]");
    expect(
      replyContext(
        msg({
          text: "x",
          external_reply: { origin: { type: "hidden_user", sender_user_name: "Z", date: 1 } },
          quote: { text: "q", position: 0 },
        }),
        BOT,
      ),
    ).toBe("[Reply to a message from another chat: q]");
  });
});

describe("attachments", () => {
  it("takes the largest photo size", () => {
    const photo = [
      { file_id: "small", file_unique_id: "s", width: 90, height: 90, file_size: 1000 },
      { file_id: "big", file_unique_id: "b", width: 1280, height: 960, file_size: 90_000 },
      { file_id: "mid", file_unique_id: "m", width: 320, height: 240, file_size: 9000 },
    ];
    expect(attachmentsOf(msg({ photo }))).toEqual([
      { kind: "photo", fileId: "big", fileName: "photo-b.jpg", sizeBytes: 90_000, mimeType: "image/jpeg" },
    ]);
  });

  it("names documents by their file name, voice and audio by type", () => {
    expect(
      attachmentsOf(
        msg({
          document: {
            file_id: "d",
            file_unique_id: "du",
            file_name: "Report Q1.pdf",
            file_size: 5,
            mime_type: "application/pdf",
          },
        }),
      ),
    ).toEqual([
      { kind: "document", fileId: "d", fileName: "Report Q1.pdf", sizeBytes: 5, mimeType: "application/pdf" },
    ]);
    expect(
      attachmentsOf(
        msg({ voice: { file_id: "v", file_unique_id: "vu", duration: 3, mime_type: "audio/ogg" } }),
      )[0],
    ).toMatchObject({
      kind: "voice",
      fileName: "voice-vu.ogg",
    });
    expect(
      attachmentsOf(
        msg({ audio: { file_id: "a", file_unique_id: "au", duration: 3, mime_type: "audio/mpeg" } }),
      )[0]!.fileName,
    ).toBe("audio-au.mp3");
    // An animation carries a document copy of itself; only one file is fetched.
    const anim = { file_id: "g", file_unique_id: "gu", width: 1, height: 1, duration: 1 };
    expect(
      attachmentsOf(msg({ animation: anim, document: { file_id: "g", file_unique_id: "gu" } })),
    ).toHaveLength(1);
  });

  it("an album becomes one message: captions joined, all files, the first part's metadata", () => {
    const parts = [1, 2, 3].map((i) =>
      mapMessage(
        msg({
          message_id: i,
          media_group_id: "alb",
          photo: [{ file_id: `p${i}`, file_unique_id: `u${i}`, width: 1, height: 1 }],
          ...(i === 1 ? { caption: "our trip" } : {}),
        }),
        BOT,
        MENTION,
      )!,
    );
    const merged = mergeAlbum(parts);
    expect(merged.inbound.content).toBe("our trip");
    expect(merged.attachments.map((a) => a.fileId)).toEqual(["p1", "p2", "p3"]);
    expect(merged.inbound.messageId).toBe("1");
    expect(merged.inbound.metadata).toMatchObject({ mediaGroupId: "alb" });
  });
});

describe("replyTarget", () => {
  it("reads the chat, topic (the bus's threadId as Telegram's number) and message to quote", () => {
    expect(replyTarget({ chatId: "-1001", replyTo: "10", threadId: "77" }, true)).toEqual({
      chatId: "-1001",
      threadId: 77,
      replyTo: 10,
    });
    expect(replyTarget({ chatId: "-1001", threadId: "77" }, false)).toEqual({
      chatId: "-1001",
      threadId: 77,
    });
    expect(replyTarget({ chatId: "5", threadId: "x" }, true)).toEqual({ chatId: "5" });
    expect(replyTarget({ chatId: "5", threadId: "1.5" }, true)).toEqual({ chatId: "5" });
  });
});

describe("leftPrivateChat", () => {
  const bot = { id: 1, is_bot: true, first_name: "palaver", username: "palaver_test_bot" };
  const update = (
    chat: ChatMemberUpdated["chat"],
    status: "kicked" | "left" | "member",
  ): ChatMemberUpdated => ({
    chat,
    from: { id: 7, is_bot: false, first_name: "Eve" },
    date: 0,
    old_chat_member: { user: bot, status: "member" },
    new_chat_member: status === "kicked" ? { user: bot, status, until_date: 0 } : { user: bot, status },
  });
  const dm = { id: 7, type: "private", first_name: "Eve" } as const;

  it("names the user who blocked the bot or left their private chat with it", () => {
    expect(leftPrivateChat(update(dm, "kicked"))).toBe("7");
    expect(leftPrivateChat(update(dm, "left"))).toBe("7");
  });

  it("ignores unblocking and anything in a group", () => {
    expect(leftPrivateChat(update(dm, "member"))).toBeUndefined();
    expect(leftPrivateChat(update({ id: -100, type: "supergroup", title: "Team" }, "left"))).toBeUndefined();
    expect(
      leftPrivateChat(update({ id: -100, type: "supergroup", title: "Team" }, "kicked")),
    ).toBeUndefined();
  });
});
